"""Module-name lookup: LDM/SGM block names checked against diffusers' own single-file converter."""

from __future__ import annotations

import pytest

from mixkit.lora.model_index import ModelIndex, ldm_block_prefixes, ldm_name


@pytest.mark.parametrize("which", ["sd1", "sdxl"])
def test_ldm_names_agree_with_diffusers_single_file_conversion(which, request):
    """Rename every UNet weight to its LDM name; diffusers' converter must map them all back."""
    from diffusers.loaders.single_file_utils import convert_ldm_unet_checkpoint

    model = request.getfixturevalue(which)
    unet = model.unet
    prefixes = ldm_block_prefixes(unet)
    ldm_state = {}
    for key, value in unet.state_dict().items():
        module_path, _, param = key.rpartition(".")
        name = ldm_name(module_path, prefixes)
        if name is None:
            continue  # modules inside attentions keep their names; they are covered through their block prefix
        ldm_state[f"model.diffusion_model.{name}.{param}"] = value
    # diffusers needs the full checkpoint; attention internals keep diffusers-style names under the LDM prefix.
    converted = convert_ldm_unet_checkpoint(ldm_state, dict(unet.config))
    original = unet.state_dict()
    assert set(converted) == set(original)
    for key in original:
        assert converted[key].data_ptr() == original[key].data_ptr() or (converted[key] == original[key]).all(), key


def test_reverse_lookup_finds_both_namings(sdxl):
    index = ModelIndex(sdxl.unet, sdxl.text_encoders)
    by_diffusers = index.find_flat("unet", "down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_q")
    by_ldm = index.find_flat("unet", "input_blocks_3_1_transformer_blocks_0_attn1_to_q")
    assert by_diffusers is not None and by_ldm is not None
    assert by_diffusers.module is by_ldm.module
    assert index.find_flat("unet", "input_blocks_2_0_op").path == "down_blocks.0.downsamplers.0.conv"
    assert index.find_flat("unet", "output_blocks_1_2_conv").path == "up_blocks.0.upsamplers.0.conv"
    assert index.find_flat("te2", "text_model_encoder_layers_0_self_attn_q_proj") is not None
    assert index.find_flat("te1", "text_model_encoder_layers_0_self_attn_q_proj") is not None
    assert index.family_label().startswith("SDXL")


def test_sgm_named_sdxl_file_applies_like_the_diffusers_named_one(tmp_path, sdxl):
    """SDXL trainers write `lora_unet_input_blocks_4_1_...`; both namings must change the same weights."""
    import torch
    from safetensors.torch import save_file

    from mixkit.lora import LoraRequest, apply_loras
    from tests.mixkit.lora.conftest import make_peer_lora, snapshot

    peer = make_peer_lora(tmp_path, sdxl, "lora", seed=61, include_te=False)
    prefixes = ldm_block_prefixes(sdxl.unet)
    flat_to_path = {p.replace(".", "_"): p for p, _ in sdxl.unet.named_modules()}
    renamed = {}
    for key, value in peer.state_dict.items():
        module, _, suffix = key.partition(".")
        path = flat_to_path[module[len("lora_unet_"):]]
        renamed[f"lora_unet_{ldm_name(path, prefixes).replace('.', '_')}.{suffix}"] = value
    assert any("input_blocks_3_1_transformer_blocks" in k for k in renamed)
    sgm_path = tmp_path / "sgm.safetensors"
    save_file(renamed, str(sgm_path))

    def merged(path):
        before = snapshot(sdxl)
        handle = apply_loras(sdxl.unet, sdxl.text_encoders, [LoraRequest(path)])
        after = snapshot(sdxl)
        handle.remove()
        return {k: after[k] - before[k] for k in before}

    by_diffusers_names, by_sgm_names = merged(peer.path), merged(sgm_path)
    assert all(torch.equal(by_diffusers_names[k], by_sgm_names[k]) for k in by_diffusers_names)
