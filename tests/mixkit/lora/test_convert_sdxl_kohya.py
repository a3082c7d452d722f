"""`convert --to kohya` on SDXL writes kohya's SGM UNet names (`lora_unet_input_blocks_...`), the names the SDXL
trainer writes (its `sgm_lora_names` map is the oracle), and the result applies exactly as the original."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open

from mixkit.lora.convert import convert_lora
from mixkit.lora.model_index import ModelIndex
from mixkit.training.kohya_export import sgm_lora_names
from tests.mixkit.lora.conftest import make_peer_lora, merged_change


def _modules(path):
    with safe_open(str(path), "pt") as handle:
        return {key.partition(".")[0] for key in handle.keys()}


@pytest.fixture
def peer(tmp_path, sdxl):
    """A kohya-format SDXL LoRA with diffusers-flat UNet names (LyCORIS on a diffusers UNet), UNet and both TEs."""
    return make_peer_lora(tmp_path, sdxl, "lora", seed=48, per_module_alpha=True)


def test_diffusers_sdxl_lora_to_kohya_uses_the_trainers_sgm_names(tmp_path, sdxl, peer):
    index = ModelIndex(sdxl.unet, sdxl.text_encoders)
    as_diffusers = convert_lora(peer.path, "diffusers", tmp_path / "d.safetensors", index)
    as_kohya = convert_lora(as_diffusers, "kohya", tmp_path / "k.safetensors", index)

    original_unet = {m for m in _modules(peer.path) if m.startswith("lora_unet_")}
    written_unet = {m for m in _modules(as_kohya) if m.startswith("lora_unet_")}
    names = sgm_lora_names(sdxl.unet)
    assert original_unet and written_unet == {names[m] for m in original_unet}
    assert all(m.startswith(("lora_unet_input_blocks_", "lora_unet_middle_block_", "lora_unet_output_blocks_"))
               for m in written_unet)
    original, round_trip = merged_change(sdxl, peer.path), merged_change(sdxl, as_kohya)
    assert original.keys() == round_trip.keys()
    for key in original:
        assert torch.allclose(original[key], round_trip[key], atol=1e-6), key


def test_kohya_diffusers_names_to_kohya_sgm_and_back_to_diffusers(tmp_path, sdxl, peer):
    index = ModelIndex(sdxl.unet, sdxl.text_encoders)
    sgm = convert_lora(peer.path, "kohya", tmp_path / "sgm.safetensors", index)
    assert {m for m in _modules(sgm) if m.startswith("lora_unet_")} == {
        sgm_lora_names(sdxl.unet)[m] for m in _modules(peer.path) if m.startswith("lora_unet_")}
    # SGM names are already kohya's: converting again, even without the model, changes nothing
    again = convert_lora(sgm, "kohya", tmp_path / "again.safetensors")
    with safe_open(str(sgm), "pt") as a, safe_open(str(again), "pt") as b:
        assert set(a.keys()) == set(b.keys())
        assert all(torch.equal(a.get_tensor(k), b.get_tensor(k)) for k in a.keys())
    back = convert_lora(sgm, "diffusers", tmp_path / "back.safetensors", index)
    original, round_trip = merged_change(sdxl, peer.path), merged_change(sdxl, back)
    for key in original:
        assert torch.allclose(original[key], round_trip[key], atol=1e-6), key


def test_diffusers_names_need_the_model_for_sgm_names(tmp_path, sdxl, peer):
    target = tmp_path / "k.safetensors"
    with pytest.raises(ValueError, match=r"kohya names SDXL UNet modules by their SGM paths .* needs the model's "
                                         r"block layout; pass --model DIR"):
        convert_lora(peer.path, "kohya", target)
    assert not target.exists()


def test_sd1_kohya_output_keeps_diffusers_flat_names(tmp_path, sd1):
    peer = make_peer_lora(tmp_path, sd1, "lora", seed=49, include_te=False)
    out = convert_lora(peer.path, "kohya", tmp_path / "k.safetensors", ModelIndex(sd1.unet, sd1.text_encoders))
    assert _modules(out) == _modules(peer.path)
    assert all(m.startswith(("lora_unet_down_blocks_", "lora_unet_mid_block_", "lora_unet_up_blocks_"))
               for m in _modules(out))
