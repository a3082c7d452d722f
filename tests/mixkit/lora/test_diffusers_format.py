"""diffusers / PEFT LoRA files, written by diffusers' own `save_lora_weights`, against PEFT's forward.

Also the same weights after diffusers' `convert_state_dict_to_kohya` (kohya naming) and in the
older attention-processor key layout.
"""

from __future__ import annotations

import torch

from mixkit.lora import LoraRequest, apply_loras, load_lora
from tests.mixkit.lora.conftest import assert_bit_identical, relative_error, run_model, snapshot

UNET_TARGETS = ["to_q", "to_k", "to_v", "to_out.0", "proj_in"]
TE_TARGETS = ["q_proj", "v_proj"]


def _peft_lora(model, tmp_path, *, unet_alpha=8, te_alpha=3, alpha_pattern=None, seed=0, use_dora=False,
               unet_targets=UNET_TARGETS):
    """Wrap a copy with PEFT adapters (random, non-zero B), save through diffusers; return (file, wrapped copy)."""
    from diffusers import StableDiffusionPipeline
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    wrapped = model.copy()
    torch.manual_seed(seed)
    wrapped.unet.add_adapter(LoraConfig(r=4, lora_alpha=unet_alpha, target_modules=unet_targets, use_dora=use_dora,
                                        alpha_pattern=alpha_pattern or {}, init_lora_weights=False))
    wrapped.text_encoders[0].add_adapter(LoraConfig(r=2, lora_alpha=te_alpha, target_modules=TE_TARGETS,
                                                    use_dora=use_dora, init_lora_weights=False))
    if use_dora:  # a trained magnitude, not PEFT's initial ||W|| (which would hide a wrong norm)
        with torch.no_grad():
            for name, parameter in [*wrapped.unet.named_parameters(), *wrapped.text_encoders[0].named_parameters()]:
                if "lora_magnitude_vector" in name:
                    parameter.mul_(1 + 0.2 * torch.rand_like(parameter))
    unet_layers = get_peft_model_state_dict(wrapped.unet)
    te_layers = get_peft_model_state_dict(wrapped.text_encoders[0])
    StableDiffusionPipeline.save_lora_weights(
        tmp_path, unet_lora_layers=unet_layers, text_encoder_lora_layers=te_layers,
        unet_lora_adapter_metadata=wrapped.unet.peft_config["default"].to_dict(),
        text_encoder_lora_adapter_metadata=wrapped.text_encoders[0].peft_config["default"].to_dict(),
    )
    return tmp_path / "pytorch_lora_weights.safetensors", wrapped, {**{f"unet.{k}": v for k, v in unet_layers.items()},
                                                                   **{f"text_encoder.{k}": v for k, v in te_layers.items()}}


def test_diffusers_file_with_alpha_metadata_matches_peft(tmp_path, sd1):
    path, wrapped, _ = _peft_lora(sd1, tmp_path, alpha_pattern={"to_k": 2})
    lora = load_lora(path)
    assert lora.format.name == "diffusers"
    assert not lora.unclaimed_keys
    # alpha_pattern gives to_k alpha 2, the rest of the UNet 8, the text encoder 3.
    assert {m.weights.alpha for m in lora.modules if m.name.endswith("to_k")} == {2.0}
    assert {m.weights.alpha for m in lora.modules if m.component == "te1"} == {3.0}
    before = snapshot(sd1)
    reference_outputs = run_model(wrapped)
    for mode in ("merge", "runtime"):
        handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)], mode=mode)
        for ours, reference in zip(run_model(sd1), reference_outputs):
            assert relative_error(ours, reference) < 1e-5, mode
        handle.remove()
        assert_bit_identical(sd1, before)


def test_kohya_conversion_by_diffusers_applies_identically(tmp_path, sd1):
    from diffusers.utils import convert_state_dict_to_kohya
    from safetensors.torch import save_file

    # convert_state_dict_to_kohya writes alpha = rank, so the PEFT reference must use lora_alpha = r.
    path, wrapped, peft_state = _peft_lora(sd1, tmp_path, unet_alpha=4, te_alpha=2)
    kohya_state = {k: v.contiguous() for k, v in convert_state_dict_to_kohya(peft_state).items()}
    assert any(k.startswith("lora_te1_") for k in kohya_state)
    kohya_path = tmp_path / "kohya.safetensors"
    save_file(kohya_state, str(kohya_path))
    assert load_lora(kohya_path).format.name == "kohya"
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(kohya_path)], mode="merge")
    for ours, reference in zip(run_model(sd1), run_model(wrapped)):
        assert relative_error(ours, reference) < 1e-5
    handle.remove()


def test_old_attention_processor_layout(tmp_path, sd1):
    from safetensors.torch import save_file

    path, wrapped, peft_state = _peft_lora(sd1, tmp_path, unet_alpha=4, te_alpha=2)
    legacy = {}
    for key, value in peft_state.items():
        if key.startswith("unet.") and ".proj_in." not in key:
            # diffusers <= 0.20 (LoRAAttnProcessor): attn.processor.to_q_lora.down.weight, to_out -> to_out.0
            module, _, tail = key.rpartition(".lora_")
            parent, _, leaf = module.rpartition(".")
            if leaf == "0":
                parent, _, leaf = parent.rpartition(".")
            direction = "down" if tail.startswith("A") else "up"
            key = f"{parent}.processor.{leaf}_lora.{direction}.weight"
        legacy[key] = value.contiguous()
    assert any(".processor.to_out_lora.up.weight" in k for k in legacy)
    legacy_path = tmp_path / "legacy.safetensors"
    save_file(legacy, str(legacy_path))
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(legacy_path)], mode="runtime")
    for ours, reference in zip(run_model(sd1), run_model(wrapped)):
        assert relative_error(ours, reference) < 1e-5
    handle.remove()


def test_peft_dora_files_match_peft_at_full_and_half_strength(tmp_path, sd1):
    # diffusers' training scripts write DoRA as PEFT's lora_magnitude_vector; PEFT puts the strength inside the norm.
    path, wrapped, _ = _peft_lora(sd1, tmp_path, use_dora=True, unet_targets=[*UNET_TARGETS, "conv1"])
    lora = load_lora(path)
    assert not lora.unclaimed_keys and all(m.weights.peft_magnitude is not None for m in lora.modules)
    assert any(m.weights.tensors["lora_down.weight"].dim() == 4 for m in lora.modules)  # a Conv2d DoRA too
    before = snapshot(sd1)
    for strength in (1.0, 0.5):
        wrapped.unet.set_adapters(["default"], weights=[strength])
        reference_outputs = run_model(wrapped)
        for mode in ("merge", "runtime"):
            handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path, 1.0, strength)], mode=mode)
            for ours, reference in zip(run_model(sd1), reference_outputs):
                assert relative_error(ours, reference) < 1e-5, (strength, mode)
            handle.remove()
            assert_bit_identical(sd1, before)


def test_a_peft_dora_file_is_not_converted_to_kohya(tmp_path, sd1):
    import pytest

    from mixkit.lora.convert import to_kohya

    path, _, _ = _peft_lora(sd1, tmp_path, use_dora=True)
    with pytest.raises(ValueError, match="DoRA in PEFT's form"):
        to_kohya(load_lora(path), None)
