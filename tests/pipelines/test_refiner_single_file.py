"""A refiner given as a single-file checkpoint (pipelines/refiner_configs.py): read with the base model's config_dir
when the base came from a single file with one and the refiner is of its family, so it refines exactly as the same
weights as a diffusers folder; otherwise a ConfigMismatchError with what to do, and the pipeline unchanged.

The tiny models match no published architecture, so a tiny single file loads only with its folder's configs: the
situation of a user's non-standard checkpoints, which is where the refiner used to fail ("does not match the 'sd15'
configs")."""

from __future__ import annotations

import numpy as np
import pytest

from mixkit.errors import ConfigMismatchError

SMALL = dict(prompt="a red fox", negative_prompt="blurry", width=64, height=64, seed=3, sampler="Euler", steps=4)


@pytest.fixture(scope="module")
def files(tiny_sd1_dir, tmp_path_factory):
    """The tiny SD1 model as a single file, and a refiner of its architecture (other weights) as a folder and as a
    single file."""
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint
    from mixkit.testing.tiny_models import build_tiny_sd1

    root = tmp_path_factory.mktemp("refiner-files")
    refiner_dir = build_tiny_sd1(root / "refiner", seed=1)
    save_ldm_checkpoint(load_diffusion_model(tiny_sd1_dir), root / "base.safetensors")
    save_ldm_checkpoint(load_diffusion_model(refiner_dir), root / "refiner.safetensors")
    return {"base": root / "base.safetensors", "refiner_dir": refiner_dir, "refiner": root / "refiner.safetensors"}


def _pixels(result) -> np.ndarray:
    return np.asarray(result.images[0], dtype=np.int16)


def test_a_single_file_refiner_refines_as_its_folder_does(tiny_sd1_dir, files):
    from pipelines.infotext import parse_infotext
    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pretrained(files["base"], config_dir=tiny_sd1_dir)
    from_folder = pipe(**SMALL, refiner=str(files["refiner_dir"]), refiner_switch_at=0.5)
    from_file = pipe(**SMALL, refiner=str(files["refiner"]), refiner_switch_at=0.5)
    plain = pipe(**SMALL)
    np.testing.assert_array_equal(_pixels(from_file), _pixels(from_folder))
    assert np.abs(_pixels(from_file) - _pixels(plain)).max() > 0  # the refiner's other weights did run
    refiner = pipe.session.refiner_slot._session.model
    assert refiner.extras["config_dir"] == str(tiny_sd1_dir)
    # the infotext names the file by its stem and hash, as A1111 names a checkpoint
    assert parse_infotext(from_file.infotexts[0])["Refiner"] == f"refiner [{refiner.model_hash}]"


def test_the_options_give_the_base_models_config_dir_to_a_file_of_its_family(tiny_sd1_dir, files, sd1_model):
    from mixkit.models.diffusion.loading import load_diffusion_model
    from pipelines.refiner_configs import refiner_config_options

    base = load_diffusion_model(files["base"], config_dir=tiny_sd1_dir)
    assert refiner_config_options(base, files["refiner"]) == {"config_dir": str(tiny_sd1_dir)}
    assert refiner_config_options(base, str(files["refiner"])) == {"config_dir": str(tiny_sd1_dir)}
    # a folder or hub id has its own configs; a loaded model is used as it is
    assert refiner_config_options(base, files["refiner_dir"]) == {}
    assert refiner_config_options(base, "stabilityai/stable-diffusion-xl-refiner-1.0") == {}
    assert refiner_config_options(base, sd1_model) == {}
    # a base model read with shipped configs or from a folder has no config_dir to pass on
    assert refiner_config_options(sd1_model, files["refiner"]) == {}


def test_a_refiner_file_of_another_family_keeps_its_shipped_configs(tiny_sdxl_dir, tiny_sdxl_refiner_dir,
                                                                     tmp_path):
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint
    from mixkit.models.diffusion import ModelFamily
    from pipelines.refiner_configs import refiner_config_options, single_file_family

    save_ldm_checkpoint(load_diffusion_model(tiny_sdxl_dir), tmp_path / "xl.safetensors")
    save_ldm_checkpoint(load_diffusion_model(tiny_sdxl_refiner_dir), tmp_path / "xl-refiner.safetensors")
    base = load_diffusion_model(tmp_path / "xl.safetensors", config_dir=tiny_sdxl_dir)
    assert single_file_family(tmp_path / "xl-refiner.safetensors") is ModelFamily.SDXL_REFINER
    assert refiner_config_options(base, tmp_path / "xl-refiner.safetensors") == {}  # an SDXL folder would not fit
    assert refiner_config_options(base, tmp_path / "xl.safetensors") == {"config_dir": str(tiny_sdxl_dir)}


def test_a_refiner_file_that_fits_no_configs_is_refused_saying_what_to_do(files):
    """A diffusers-folder base has no config_dir, so the tiny refiner file is read with the shipped SD 1.5 configs:
    refused, with the refiner's way out; the pipeline then generates as before the failed call."""
    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pretrained(files["refiner_dir"])  # any tiny SD1 folder as the base
    before = pipe(**SMALL)
    with pytest.raises(ConfigMismatchError) as caught:
        pipe(**SMALL, refiner=str(files["refiner"]), refiner_switch_at=0.5)
    message = str(caught.value)
    assert message.startswith(f"{files['refiner']} does not match the 'sd15' configs: ")
    assert ("The refiner is a single file, read with the shipped configs of its family. If it is complete, it has "
            "another architecture: give the diffusers folder whose configs match it as refiner_config_dir=FOLDER "
            "(mixkit generate / img2img --refiner-config-dir FOLDER), or pass the refiner loaded with them "
            "(refiner=TextToImage.from_pretrained(path, config_dir=FOLDER))") in message
    assert "mixkit generate --config-dir FOLDER" in message
    assert caught.value.read_with == "shipped"  # for a caller's own advice (the web server's, in request terms)
    assert pipe.session.refiner_slot._session is None  # nothing half-loaded kept for the next call
    np.testing.assert_array_equal(_pixels(pipe(**SMALL)), _pixels(before))


def test_a_refiner_file_that_does_not_fit_the_base_models_config_dir_names_it(tiny_sd1_dir, files, tmp_path):
    """An SD1 refiner file the base model's config_dir does not describe (here: one UNet tensor short): the error
    names the folder it was read with, and the missing key."""
    from safetensors.torch import load_file, save_file

    from pipelines.txt2img import TextToImage

    state = load_file(files["refiner"])
    del state["model.diffusion_model.out.2.bias"]
    save_file(state, tmp_path / "short.safetensors")
    pipe = TextToImage.from_pretrained(files["base"], config_dir=tiny_sd1_dir)
    with pytest.raises(ConfigMismatchError) as caught:
        pipe(**SMALL, refiner=str(tmp_path / "short.safetensors"), refiner_switch_at=0.5)
    message = str(caught.value)
    assert f"does not match the {str(tiny_sd1_dir)!r} configs: 1 missing keys" in message
    assert "'model.diffusion_model.out.2.bias'" in message
    assert (f"The refiner is a single file, read with the configs of {str(tiny_sd1_dir)!r}, the base model's "
            "config_dir. ") in message
    assert caught.value.read_with == "config_dir"



def test_a_single_file_refiner_with_its_own_config_dir_refines_as_its_folder_does(tiny_sd1_dir, files):
    """A base loaded from a diffusers folder has no config_dir to pass on: refiner_config_dir gives the refiner file
    its configs, and the image is the folder refiner's to the pixel."""
    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    from_folder = pipe(**SMALL, refiner=str(files["refiner_dir"]), refiner_switch_at=0.5)
    from_file = pipe(**SMALL, refiner=str(files["refiner"]), refiner_config_dir=str(files["refiner_dir"]),
                     refiner_switch_at=0.5)
    np.testing.assert_array_equal(_pixels(from_file), _pixels(from_folder))
    assert np.abs(_pixels(from_file) - _pixels(pipe(**SMALL))).max() > 0  # the refiner's other weights did run
    assert pipe.session.refiner_slot._session.model.extras["config_dir"] == str(files["refiner_dir"])


def test_img2img_takes_the_refiners_config_dir_too(tiny_sd1_dir, files):
    from PIL import Image

    from pipelines.img2img import ImageToImage

    pipe = ImageToImage.from_pretrained(tiny_sd1_dir)
    init = Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8))
    call = dict(SMALL, init_images=[init], denoising_strength=0.75, refiner_switch_at=0.5)
    from_folder = pipe(**call, refiner=str(files["refiner_dir"]))
    from_file = pipe(**call, refiner=str(files["refiner"]), refiner_config_dir=files["refiner_dir"])
    np.testing.assert_array_equal(_pixels(from_file), _pixels(from_folder))


def test_the_refiners_config_dir_wins_over_the_base_models(tiny_sd1_dir, files, tmp_path):
    """A base file read with config_dir: the refiner file is read with its own refiner_config_dir (here a copy of
    the configs in another folder, so which one was used shows)."""
    import shutil

    from pipelines.txt2img import TextToImage

    own = shutil.copytree(files["refiner_dir"], tmp_path / "refiner-configs")
    pipe = TextToImage.from_pretrained(files["base"], config_dir=tiny_sd1_dir)
    pipe(**SMALL, refiner=str(files["refiner"]), refiner_config_dir=str(own), refiner_switch_at=0.5)
    assert pipe.session.refiner_slot._session.model.extras["config_dir"] == str(own)


def _refusal(files, tiny_sdxl_dir, tmp_path, case):
    """(refiner, refiner_config_dir) of each refused case, and a fragment of its message."""
    from mixkit.models.diffusion.loading import load_diffusion_model

    empty = tmp_path / "empty"
    empty.mkdir()
    return {
        "no refiner": (None, files["refiner_dir"], "sets the configs of a single-file refiner, and no refiner is "
                       "given: add the refiner checkpoint, or drop refiner_config_dir."),
        "folder refiner": (str(files["refiner_dir"]), files["refiner_dir"], "is a diffusers folder, which has its "
                           "own configs: drop refiner_config_dir."),
        "hub id": ("stabilityai/stable-diffusion-xl-refiner-1.0", files["refiner_dir"], "is no file (a hub id brings "
                   "its own configs): give the refiner's .safetensors / .ckpt path, or drop refiner_config_dir."),
        "loaded refiner": (load_diffusion_model(files["refiner_dir"]), files["refiner_dir"], "this refiner is already "
                           "a loaded model, built with its configs: drop refiner_config_dir."),
        "missing folder": (str(files["refiner"]), tmp_path / "nowhere", "is not a folder: give the diffusers model "
                           "folder whose configs describe the refiner file"),
        "no configs": (str(files["refiner"]), empty, "does not hold the configs a single-file refiner is read with: "
                       f"{empty} needs text_encoder/"),
        "other family": (str(files["refiner"]), tiny_sdxl_dir, "describes SDXL base but the refiner"),
    }[case]


@pytest.mark.parametrize("case", ["no refiner", "folder refiner", "hub id", "loaded refiner", "missing folder",
                                  "no configs", "other family"])
def test_a_bad_refiner_config_dir_is_refused_before_anything_runs(tiny_sd1_dir, tiny_sdxl_dir, files, tmp_path,
                                                                   case):
    from pipelines.txt2img import TextToImage

    refiner, config_dir, message = _refusal(files, tiny_sdxl_dir, tmp_path, case)
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    calls = []
    pipe.session.refiner_slot.session = lambda *args: calls.append(args)  # nothing may load a refiner
    with pytest.raises(ValueError) as caught:
        pipe(**SMALL, refiner=refiner, refiner_config_dir=config_dir, refiner_switch_at=0.5)
    assert message in str(caught.value) and f"refiner_config_dir={str(config_dir)!r}" in str(caught.value)
    assert calls == []


def test_a_refiner_config_dir_of_another_type_is_refused(tiny_sd1_dir, files):
    from pipelines.txt2img import TextToImage

    with pytest.raises(TypeError, match="refiner_config_dir must be the path of a diffusers model folder"):
        TextToImage.from_pretrained(tiny_sd1_dir)(**SMALL, refiner=str(files["refiner"]), refiner_config_dir=3)


def test_a_refiner_file_that_does_not_fit_its_config_dir_says_it_was_read_with_it(tiny_sd1_dir, files, tmp_path):
    from safetensors.torch import load_file, save_file

    from pipelines.txt2img import TextToImage

    state = load_file(files["refiner"])
    del state["model.diffusion_model.out.2.bias"]
    save_file(state, tmp_path / "short.safetensors")
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    before = pipe(**SMALL)
    with pytest.raises(ConfigMismatchError) as caught:
        pipe(**SMALL, refiner=str(tmp_path / "short.safetensors"), refiner_config_dir=files["refiner_dir"],
             refiner_switch_at=0.5)
    assert (f"The refiner is a single file, read with the configs of {str(files['refiner_dir'])!r}, its "
            "refiner_config_dir. ") in str(caught.value)
    assert pipe.session.refiner_slot._session is None
    np.testing.assert_array_equal(_pixels(pipe(**SMALL)), _pixels(before))


def _as_ckpt(safetensors_file, ckpt_file):
    """An A1111-style `.ckpt` of the same weights: a torch zip archive, the tensors under "state_dict"."""
    import torch
    from safetensors.torch import load_file

    torch.save({"state_dict": load_file(safetensors_file), "global_step": 1}, ckpt_file)
    return ckpt_file


def test_a_ckpt_refiner_with_its_config_dir_refines_as_its_folder_does(tiny_sd1_dir, files, tmp_path):
    from pipelines.txt2img import TextToImage

    ckpt = _as_ckpt(files["refiner"], tmp_path / "refiner.ckpt")
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    from_folder = pipe(**SMALL, refiner=str(files["refiner_dir"]), refiner_switch_at=0.5)
    from_ckpt = pipe(**SMALL, refiner=str(ckpt), refiner_config_dir=files["refiner_dir"], refiner_switch_at=0.5)
    np.testing.assert_array_equal(_pixels(from_ckpt), _pixels(from_folder))


def test_a_ckpt_refiner_of_another_family_is_refused_before_anything_runs(tiny_sd1_dir, tiny_sdxl_dir, files,
                                                                           tmp_path):
    """Its family comes from its keys, as a .safetensors' from its header: refused by the call's check, before the
    base model samples (it used to fail only at the switch, once the refiner file was loaded)."""
    from pipelines.txt2img import TextToImage

    ckpt = _as_ckpt(files["refiner"], tmp_path / "refiner.ckpt")
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    sampled, loaded = [], []
    pipe.session.refiner_slot.session = lambda *args: loaded.append(args)
    with pytest.raises(ValueError) as caught:
        pipe(**SMALL, refiner=str(ckpt), refiner_config_dir=tiny_sdxl_dir, refiner_switch_at=0.5,
             callback=lambda state: sampled.append(state))
    assert str(caught.value) == (
        f"refiner_config_dir={str(tiny_sdxl_dir)!r} describes SDXL base but the refiner {str(ckpt)!r} is SD 1.x: give "
        "the diffusers folder of a model of the refiner's family (SD 1.x) and architecture.")
    assert (sampled, loaded) == ([], [])


def test_a_ckpt_refiner_of_another_family_keeps_its_shipped_configs(tiny_sdxl_dir, tiny_sdxl_refiner_dir, tmp_path):
    """Next to a base file read with config_dir, a .ckpt refiner of another family is no longer taken to be the
    base's (whose folder would not describe it)."""
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint
    from pipelines.refiner_configs import refiner_config_options

    save_ldm_checkpoint(load_diffusion_model(tiny_sdxl_dir), tmp_path / "xl.safetensors")
    save_ldm_checkpoint(load_diffusion_model(tiny_sdxl_refiner_dir), tmp_path / "xl-refiner.safetensors")
    base = load_diffusion_model(tmp_path / "xl.safetensors", config_dir=tiny_sdxl_dir)
    refiner = _as_ckpt(tmp_path / "xl-refiner.safetensors", tmp_path / "xl-refiner.ckpt")
    same_family = _as_ckpt(tmp_path / "xl.safetensors", tmp_path / "xl.ckpt")
    assert refiner_config_options(base, refiner) == {}
    assert refiner_config_options(base, same_family) == {"config_dir": str(tiny_sdxl_dir)}


def test_an_unsafe_ckpt_refiner_is_refused_by_the_check_without_running(tiny_sd1_dir, files, tmp_path):
    import os

    import torch

    from mixkit.errors import UnsafeCheckpointError
    from pipelines.txt2img import TextToImage

    class RunsShellCommand:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'SENTINEL'}",))

    torch.save({"state_dict": {"w": torch.ones(1)}, "hook": RunsShellCommand()}, tmp_path / "evil.ckpt")
    with pytest.raises(UnsafeCheckpointError, match=r"evil\.ckpt.*posix\.system"):
        TextToImage.from_pretrained(tiny_sd1_dir)(**SMALL, refiner=str(tmp_path / "evil.ckpt"),
                                                  refiner_config_dir=files["refiner_dir"])
    assert not (tmp_path / "SENTINEL").exists()
