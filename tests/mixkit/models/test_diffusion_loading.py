"""Loading SD models through the public loader: families, sources and refusals."""

import os
import pickle

import pytest

from mixkit.errors import CheckpointFormatError, ModelNotFoundError, UnsafeCheckpointError
from mixkit.models.diffusion import ModelFamily
from mixkit.models.diffusion.loading import load_diffusion_model


@pytest.mark.parametrize("fixture, family, description", [
    ("tiny_sd1_dir", ModelFamily.SD1, "SD 1.x"),
    ("tiny_sd2v_dir", ModelFamily.SD2, "SD 2.x (v-prediction)"),
    ("tiny_sdxl_dir", ModelFamily.SDXL, "SDXL base"),
])
def test_family_is_detected_from_the_configs(request, fixture, family, description):
    model = load_diffusion_model(request.getfixturevalue(fixture))
    assert model.family is family
    assert model.description == description
    assert len(model.text_encoders) == (2 if family is ModelFamily.SDXL else 1)
    assert len(model.model_hash) == 10


def test_hub_id_is_resolved_from_the_offline_cache(tiny_sd1_dir, tmp_path, monkeypatch):
    """A hub id found in the HF cache loads with HF_HUB_OFFLINE=1, exactly like the folder."""
    import shutil

    snapshot = tmp_path / "hub" / "models--someone--tiny-sd" / "snapshots" / ("a" * 40)
    shutil.copytree(tiny_sd1_dir, snapshot)
    (tmp_path / "hub" / "models--someone--tiny-sd" / "refs").mkdir()
    (tmp_path / "hub" / "models--someone--tiny-sd" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    model = load_diffusion_model("someone/tiny-sd")
    assert model.family is ModelFamily.SD1


def test_uncached_hub_id_offline_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    with pytest.raises(ModelNotFoundError, match="someone/not-cached"):
        load_diffusion_model("someone/not-cached")


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(ModelNotFoundError):
        load_diffusion_model(tmp_path / "no" / "such" / "model.safetensors")


def test_a_folder_that_is_not_a_model_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ModelNotFoundError, match="model_index.json"):
        load_diffusion_model(tmp_path)


def test_a_transformers_folder_is_named_as_such(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelNotFoundError, match="transformers model"):
        load_diffusion_model(tmp_path)


class _Payload:
    def __init__(self, sentinel):
        self.sentinel = sentinel

    def __reduce__(self):
        return (os.system, (f"touch {self.sentinel}",))


@pytest.mark.parametrize("suffix", [".ckpt", ".safetensors"])
def test_a_checkpoint_whose_pickle_calls_os_system_is_refused(tmp_path, suffix):
    sentinel = tmp_path / "PWNED"
    path = tmp_path / f"model{suffix}"
    path.write_bytes(pickle.dumps({"state_dict": _Payload(sentinel)}))
    with pytest.raises(UnsafeCheckpointError, match="system"):
        load_diffusion_model(path)
    assert not sentinel.exists()


def test_a_truncated_safetensors_checkpoint_is_refused(tmp_path):
    from safetensors.torch import save_file
    import torch

    path = tmp_path / "model.safetensors"
    save_file({"model.diffusion_model.x": torch.zeros(64, 64)}, str(path))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointFormatError, match="truncated|corrupt"):
        load_diffusion_model(path)


def test_single_file_checkpoint_generates_the_same_images_as_its_folder(tiny_sd1_dir, tmp_path):
    """A user exporting to (or downloading) the A1111 single-file layout gets the same pictures."""
    import numpy as np

    from mixkit.models.diffusion.single_file import load_single_file
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint
    from pipelines.txt2img import TextToImage

    folder_model = load_diffusion_model(tiny_sd1_dir)
    path = save_ldm_checkpoint(folder_model, tmp_path / "tiny.safetensors")
    file_model = load_single_file(path, config_dir=tiny_sd1_dir)
    kwargs = dict(prompt="a red circle", seed=3, width=64, height=64, steps=3)
    a = TextToImage(folder_model)(**kwargs)
    b = TextToImage(file_model)(**kwargs)
    assert np.array_equal(np.asarray(a.images[0]), np.asarray(b.images[0]))
    assert f"Model hash: {file_model.model_hash}" in b.infotexts[0] and len(file_model.model_hash) == 10


def test_vae_override_from_a_single_file(tiny_sd1_dir, tmp_path):
    import torch
    from safetensors.torch import save_file

    from mixkit.models.diffusion.ldm_layout import vae_to_ldm

    base = load_diffusion_model(tiny_sd1_dir)
    other_vae = load_diffusion_model(tiny_sd1_dir).vae
    with torch.no_grad():
        for p in other_vae.parameters():
            p.mul_(0.5)
    state = {key: tensor.contiguous() for key, tensor in vae_to_ldm(other_vae, "").items()}
    save_file(state, str(tmp_path / "my-vae.safetensors"))
    model = load_diffusion_model(tiny_sd1_dir, vae=tmp_path / "my-vae.safetensors")
    # A1111's infotext `VAE:` is os.path.basename(loaded_vae_file) (sd_vae.get_loaded_vae_name)
    assert model.extras["vae_name"] == "my-vae.safetensors" and len(model.extras["vae_hash"]) == 10
    for (name, a), b in zip(model.vae.state_dict().items(), other_vae.state_dict().values()):
        assert torch.equal(a, b), name
    assert model.vae.config.scaling_factor == base.vae.config.scaling_factor
