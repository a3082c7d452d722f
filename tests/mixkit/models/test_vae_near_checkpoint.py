"""A1111's "Automatic" VAE: `<checkpoint>.vae.safetensors/.vae.pt/.vae.ckpt` next to a single-file checkpoint.

Reference: A1111 modules/sd_vae.py find_vae_near_checkpoint / resolve_vae (Automatic uses the VAE found near the
checkpoint; "None" the checkpoint's built-in one) and get_loaded_vae_name (os.path.basename of the VAE file).
"""

from __future__ import annotations

import pytest
import torch

from mixkit.io import save_safetensors
from mixkit.models.diffusion.ldm_layout import vae_to_ldm
from mixkit.models.diffusion.loading import find_vae_near_checkpoint, load_diffusion_model
from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint
from mixkit.testing.tiny_models import tiny_vae


pytestmark = pytest.mark.usefixtures("hash_cache_in_tmp")


@pytest.fixture(scope="module")
def checkpoint(tiny_sd1_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("near")
    return save_ldm_checkpoint(load_diffusion_model(tiny_sd1_dir), folder / "sd1.safetensors")


def _same(module, state):
    return all(torch.equal(module.state_dict()[k], v) for k, v in state.items())


@pytest.mark.parametrize("suffix", [".vae.safetensors", ".vae.pt", ".vae.ckpt"])
def test_vae_next_to_the_checkpoint_is_used_and_named_with_its_extension(checkpoint, tiny_sd1_dir, suffix):
    sidecar_vae = tiny_vae(seed=7)
    sidecar = checkpoint.with_name("sd1" + suffix)
    ldm = {k: v.contiguous() for k, v in vae_to_ldm(sidecar_vae, "").items()}
    if suffix == ".vae.safetensors":
        save_safetensors(ldm, sidecar)
    else:
        torch.save({"state_dict": ldm}, sidecar)  # pickled VAEs load weights-only
    try:
        assert find_vae_near_checkpoint(checkpoint) == sidecar
        model = load_diffusion_model(checkpoint, config_dir=tiny_sd1_dir)
        assert _same(model.vae, sidecar_vae.state_dict())
        assert model.extras["vae_name"] == f"sd1{suffix}" and len(model.extras["vae_hash"]) == 10

        builtin = load_diffusion_model(checkpoint, config_dir=tiny_sd1_dir, vae_near_checkpoint=False)  # A1111's None
        assert not _same(builtin.vae, sidecar_vae.state_dict()) and "vae_name" not in builtin.extras
    finally:
        sidecar.unlink()


def test_only_the_exact_name_counts_and_folders_have_none(checkpoint, tiny_sd1_dir, tmp_path):
    assert find_vae_near_checkpoint(checkpoint) is None
    other = checkpoint.with_name("sd1-other.vae.safetensors")  # later A1111 takes any VAE named "sd1..."
    other.write_bytes(b"not read")
    try:
        assert find_vae_near_checkpoint(checkpoint) is None
        assert find_vae_near_checkpoint(other) is None  # a .vae. file is not a checkpoint with a VAE of its own
        assert find_vae_near_checkpoint(tiny_sd1_dir) is None
    finally:
        other.unlink()


def test_vae_near_checkpoint_must_be_a_bool(checkpoint):
    with pytest.raises(TypeError, match="vae_near_checkpoint must be True or False"):
        load_diffusion_model(checkpoint, vae_near_checkpoint="no")
