"""The VAE list and the VAE swap as A1111's sd_vae has them: pickled VAE files listed, names with extensions,
"Automatic" taking `<checkpoint>.vae.*` next to the checkpoint and "None" the checkpoint's built-in VAE.

Reference: A1111 modules/sd_vae.py refresh_vae_list (models/VAE `**/*.ckpt`, `**/*.pt`, `**/*.safetensors`, plus
the checkpoint dir's `**/*.vae.ckpt|pt|safetensors`; the name is the file's basename), get_loaded_vae_name
(os.path.basename of the loaded file, written as the infotext's `VAE:` and pasted back into `sd_vae`),
resolve_vae ("None": no VAE file; Automatic: the VAE near the checkpoint).
"""

from __future__ import annotations

import logging
import os

import pytest
import torch

from mixkit.io import save_safetensors
from mixkit.models.diffusion.ldm_layout import vae_to_ldm
from mixkit.testing.tiny_models import tiny_vae
from webui.vae_catalog import VaeCatalog


pytestmark = pytest.mark.usefixtures("hash_cache_in_tmp")


class RunsShellCommand:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def _ldm(vae) -> dict:
    return {k: v.contiguous() for k, v in vae_to_ldm(vae, "").items()}


def test_pickled_vaes_are_listed_and_a_hostile_one_is_left_out_with_a_warning(tmp_path, caplog):
    vd = tmp_path / "vd"
    vd.mkdir()
    state = _ldm(tiny_vae(seed=1))
    save_safetensors(state, vd / "myvae.safetensors")
    torch.save(state, vd / "myvae.pt")
    torch.save({"state_dict": state}, vd / "vae-ft-mse-840000-ema-pruned.ckpt")
    torch.save({"state_dict": state, "x": RunsShellCommand(f"touch {tmp_path / 'PWNED'}")}, vd / "evil.ckpt")
    with caplog.at_level(logging.WARNING, logger="webui.vae_catalog"):
        catalog = VaeCatalog(str(vd))
    assert catalog.names() == ["Automatic", "myvae.pt", "myvae.safetensors", "vae-ft-mse-840000-ema-pruned.ckpt"]
    assert "evil.ckpt is not listed" in caplog.text and "posix.system" in caplog.text
    assert not (tmp_path / "PWNED").exists()


def test_vae_files_next_to_checkpoints_are_listed_too(tmp_path):
    models = tmp_path / "md"
    (models / "sub").mkdir(parents=True)
    (models / "sub" / "model.vae.safetensors").write_bytes(b"x")
    (models / "model.safetensors").write_bytes(b"x")  # a checkpoint, not a VAE
    assert VaeCatalog(None, checkpoints_dir=str(models)).names() == ["Automatic", "model.vae.safetensors"]


def test_an_infotext_vae_name_selects_the_listed_file(tmp_path):
    vd = tmp_path / "vd"
    vd.mkdir()
    for name in ("kl-f8.safetensors", "twin.pt", "twin.safetensors"):
        (vd / name).write_bytes(b"x")
    catalog = VaeCatalog(str(vd))
    assert catalog.name_for_infotext("kl-f8.safetensors") == "kl-f8.safetensors"
    assert catalog.name_for_infotext("kl-f8") == "kl-f8.safetensors"  # what mixkit wrote before: still pastes
    assert catalog.name_for_infotext("twin") is None  # two files: the infotext does not say which
    assert catalog.name_for_infotext("vae-ft-mse-840000-ema-pruned.ckpt") is None  # not on this server


@pytest.fixture(scope="module")
def single_file_with_sidecar(tiny_sd1_dir, tmp_path_factory):
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint

    folder = tmp_path_factory.mktemp("models")
    checkpoint = save_ldm_checkpoint(load_diffusion_model(tiny_sd1_dir), folder / "sd1.safetensors")
    sidecar_vae, listed_vae = tiny_vae(seed=7), tiny_vae(seed=8)
    save_safetensors(_ldm(sidecar_vae), folder / "sd1.vae.safetensors")
    vd = tmp_path_factory.mktemp("vd")
    save_safetensors(_ldm(listed_vae), vd / "listed.safetensors")
    return checkpoint, sidecar_vae, listed_vae, vd


def test_automatic_is_the_sidecar_none_the_builtin_and_names_keep_extensions(single_file_with_sidecar, tiny_sd1_dir):
    from webui.checkpoints import CheckpointCatalog
    from webui.model_switch import ModelHolder

    checkpoint, sidecar_vae, listed_vae, vd = single_file_with_sidecar
    catalog = CheckpointCatalog(models_dir=checkpoint.parent)
    assert catalog.titles() == ["sd1.safetensors"]  # the .vae. file is not a checkpoint
    vaes = VaeCatalog(str(vd), checkpoints_dir=str(checkpoint.parent))
    holder = ModelHolder(catalog, pipeline_kwargs={"config_dir": str(tiny_sd1_dir)})
    holder.switch("sd1.safetensors")
    model = holder.txt2img().model

    def decoder_is(vae):
        return torch.equal(model.vae.decoder.conv_out.weight, vae.decoder.conv_out.weight)

    assert holder.vae_name == "Automatic" and decoder_is(sidecar_vae)
    assert model.extras["vae_name"] == "sd1.vae.safetensors"

    from mixkit.models.diffusion.loading import VAE_SETTING_KEY

    assert VAE_SETTING_KEY not in model.extras  # "Automatic": a refiner decodes with its own VAE
    holder.set_vae("listed.safetensors", vaes.find("listed.safetensors"))
    assert decoder_is(listed_vae) and model.extras["vae_name"] == "listed.safetensors"
    assert model.extras[VAE_SETTING_KEY] == "listed.safetensors"  # chosen for every checkpoint, the refiner's too

    holder.set_vae("None", vaes.find("None"))  # A1111's None: the checkpoint's built-in VAE
    from diffusers import AutoencoderKL

    assert decoder_is(AutoencoderKL.from_pretrained(tiny_sd1_dir / "vae")) and "vae_name" not in model.extras
    assert model.extras[VAE_SETTING_KEY] == "None"  # each checkpoint's built-in VAE

    holder.set_vae("Automatic", vaes.find("Automatic"))
    assert decoder_is(sidecar_vae) and model.extras["vae_name"] == "sd1.vae.safetensors"
    assert VAE_SETTING_KEY not in model.extras
