"""Shared fixtures: tiny models built once per test session and saved to disk.

Tests load them back through the public loaders, exactly as a user would load a downloaded model.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")

# Everything the suite writes outside its checkout goes under one folder of its own: pytest's tmp_path, Gradio's
# cache, gradio_client's downloads (one random folder per file, never removed), Inductor's default cache and
# mixkit's own cache (hashes, compiled kernels), which would otherwise be the user's ~/.cache/mixkit. Left in /tmp
# they came to tens of GB over a few dozen runs on a shared disk, and one run then failed to install torch for lack
# of space. A passing run removes the folder; a failing one keeps it for inspection.
SUITE_TMP = tempfile.mkdtemp(prefix="mixkit-tests-")
os.environ["TMPDIR"] = SUITE_TMP
tempfile.tempdir = SUITE_TMP
os.environ["GRADIO_TEMP_DIR"] = os.path.join(SUITE_TMP, "gradio")
os.environ["MIXKIT_CACHE_DIR"] = os.path.join(SUITE_TMP, "mixkit-cache")


def pytest_configure(config):
    """Tiny models spend more time in thread hand-offs than in math: one thread is several times faster."""
    import torch

    torch.set_num_threads(1)


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0:
        shutil.rmtree(SUITE_TMP, ignore_errors=True)
    else:
        print(f"\nmixkit tests: temporary files kept in {SUITE_TMP}")


@pytest.fixture(scope="session")
def tiny_sd1_dir(tmp_path_factory):
    from mixkit.testing.tiny_models import build_tiny_sd1

    return build_tiny_sd1(tmp_path_factory.mktemp("tiny-sd1"), seed=0)


@pytest.fixture(scope="session")
def tiny_sd2v_dir(tmp_path_factory):
    from mixkit.testing.tiny_models import build_tiny_sd1

    return build_tiny_sd1(tmp_path_factory.mktemp("tiny-sd2v"), seed=0, prediction_type="v_prediction", sd2=True)


@pytest.fixture(scope="session")
def tiny_sdxl_dir(tmp_path_factory):
    from mixkit.testing.tiny_models import build_tiny_sdxl

    return build_tiny_sdxl(tmp_path_factory.mktemp("tiny-sdxl"), seed=0)


@pytest.fixture(scope="session")
def tiny_text_to_video_dir(tmp_path_factory):
    from mixkit.testing.tiny_video import build_tiny_text_to_video

    return build_tiny_text_to_video(tmp_path_factory.mktemp("tiny-text-to-video"), seed=0)


@pytest.fixture(scope="session")
def tiny_audioldm_dir(tmp_path_factory):
    from mixkit.testing.tiny_audio import build_tiny_audioldm

    return build_tiny_audioldm(tmp_path_factory.mktemp("tiny-audioldm"), seed=0)


@pytest.fixture(scope="session")
def tiny_musicldm_dir(tmp_path_factory):
    from mixkit.testing.tiny_audio import build_tiny_musicldm

    return build_tiny_musicldm(tmp_path_factory.mktemp("tiny-musicldm"), seed=0)


@pytest.fixture(scope="session")
def tiny_audioldm2_dir(tmp_path_factory):
    from mixkit.testing.tiny_audio import build_tiny_audioldm2

    return build_tiny_audioldm2(tmp_path_factory.mktemp("tiny-audioldm2"), seed=0)


@pytest.fixture(scope="session")
def tiny_audioldm2_tts_dir(tmp_path_factory):
    from mixkit.testing.tiny_audio import build_tiny_audioldm2

    return build_tiny_audioldm2(tmp_path_factory.mktemp("tiny-audioldm2-tts"), seed=0, text_to_speech=True)


@pytest.fixture(scope="module")
def sd1_model(tiny_sd1_dir):
    """The tiny SD 1.x model loaded through the public loader, once per test module (loading costs seconds); a test
    that changes it puts it back."""
    from mixkit.models.diffusion.loading import load_diffusion_model

    return load_diffusion_model(tiny_sd1_dir)


@pytest.fixture(scope="module")
def sdxl_model(tiny_sdxl_dir):
    """The tiny SDXL model loaded through the public loader, once per test module; a test that changes it puts it
    back."""
    from mixkit.models.diffusion.loading import load_diffusion_model

    return load_diffusion_model(tiny_sdxl_dir)


@pytest.fixture(scope="session")
def tiny_ip2p_dir(tmp_path_factory):
    """A tiny SD 1.x instruct-pix2pix folder (8-channel UNet)."""
    from mixkit.testing.tiny_instruct_pix2pix import build_tiny_instruct_pix2pix

    return build_tiny_instruct_pix2pix(tmp_path_factory.mktemp("tiny-ip2p"), seed=0)


@pytest.fixture(scope="session")
def tiny_sdxl_refiner_dir(tmp_path_factory):
    from mixkit.testing.tiny_models import build_tiny_sdxl_refiner

    return build_tiny_sdxl_refiner(tmp_path_factory.mktemp("tiny-sdxl-refiner"), seed=0)


@pytest.fixture
def hash_cache_in_tmp(tmp_path, monkeypatch):
    """Model hashes are cached under MIXKIT_CACHE_DIR; tests that hash files point it into their own tmp folder
    so no test reads another's (or the user's) cached hash. Used with `pytestmark = usefixtures(...)`."""
    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "cache"))


# Fixtures whose model outlives one test, wherever they are defined: the session's pipelines (tests/pipelines' and
# tests/mixkit/prompts' diffusers ones), the models loaded once per test module (`sd1_model` / `sdxl_model` above,
# `refiner_model`), and the pipelines loaded once per module (`inpaint_pipe`, tests/pipelines' `base_pipe`). A
# pipeline is checked through its `.model` (a diffusers one through its own components, tests/model_patches.py).
SHARED_MODELS = ("sd1_pipe", "sdxl_pipe", "inpaint_pipe", "base_pipe", "sd1_model", "sdxl_model", "refiner_model")


@pytest.fixture(autouse=True)
def shared_models_left_as_found(request):
    """Fails a test that leaves a forward patch or hook on a model another test will use (`SHARED_MODELS`: a spy put
    back as the bound method, a wrapper a pipeline call forgot when it raised, a VAE decode guard) and takes it off,
    so no later test sees a model that depends on test order. Only tests that use one (directly or through a
    fixture) are checked: the walk over a tiny model's modules costs a few milliseconds, the others nothing."""
    used = [name for name in SHARED_MODELS if name in request.fixturenames]
    if not used:
        yield
        return
    from .model_patches import describe, model_patches, remove_patches

    models = {name: request.getfixturevalue(name) for name in used}
    before = {name: model_patches(model) for name, model in models.items()}
    yield
    for name, model in models.items():
        left = {key: value for key, value in model_patches(model).items() if key not in before[name]}
        if left:
            remove_patches(left)
            pytest.fail(f"the test left patches on the shared {name}: {describe(left)}; restore a replaced forward "
                        "by removing the instance attribute (tests/pipelines/unet_spy.replaced_forward), remove "
                        "forward patches (ForwardPatch.remove) and hooks")
