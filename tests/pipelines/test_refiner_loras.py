"""The call's LoRAs on the refiner: A1111 re-runs setup_conds for the refiner and its LoRA hooks act on the layers it
has; here a LoRA is applied to the refiner when it fits it, and otherwise the refiner runs without it (warned)."""

from __future__ import annotations

import pytest
import torch

SMALL = dict(prompt="a red fox", negative_prompt="blurry", width=64, height=64, seed=3, sampler="Euler", steps=4,
             refiner_switch_at=0.6)


def _first_query(unet):
    return next(module for name, module in unet.named_modules() if name.endswith("attn1.to_q"))


def _weights_seen_by(unet, seen: list):
    """Record the first query projection's weight at each call of `unet` (what a LoRA merge changes)."""
    original = unet.forward

    def spy(*args, **kwargs):
        seen.append(_first_query(unet).weight.detach().clone())
        return original(*args, **kwargs)

    unet.forward = spy
    return original


def test_a_lora_that_fits_the_refiner_acts_on_its_steps_and_is_removed(tiny_sd1_dir, tmp_path):
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.testing.tiny_lora import write_attention_lora
    from mixkit.testing.tiny_models import build_tiny_sd1
    from pipelines.txt2img import TextToImage

    refiner = load_diffusion_model(build_tiny_sd1(tmp_path / "sd1-refiner", seed=7))
    loras = tmp_path / "loras"
    loras.mkdir()
    write_attention_lora(refiner.unet, loras / "shiny.safetensors")
    pipe = TextToImage.from_pretrained(tiny_sd1_dir, lora_dir=loras)
    original_weight = _first_query(refiner.unet).weight.detach().clone()
    seen = []
    original = _weights_seen_by(refiner.unet, seen)
    try:
        pipe(**{**SMALL, "prompt": "a red fox <lora:shiny:1>"}, refiner=refiner)
    finally:
        refiner.unet.forward = original
    assert len(seen) == 2 and all(not torch.equal(weight, original_weight) for weight in seen)
    assert torch.equal(_first_query(refiner.unet).weight, original_weight)


def test_a_lora_that_does_not_fit_the_refiner_is_left_out_with_a_warning(tiny_sdxl_dir, tiny_sdxl_refiner_dir,
                                                                          tmp_path):
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.testing.tiny_lora import write_attention_lora
    from pipelines.txt2img import TextToImage

    refiner = load_diffusion_model(tiny_sdxl_refiner_dir)
    loras = tmp_path / "loras"
    loras.mkdir()
    pipe = TextToImage.from_pretrained(tiny_sdxl_dir, lora_dir=loras)
    write_attention_lora(pipe.model.unet, loras / "base_only.safetensors")  # SDXL base layers: no fit on the refiner
    original_weight = _first_query(refiner.unet).weight.detach().clone()
    seen = []
    original = _weights_seen_by(refiner.unet, seen)
    try:
        with pytest.warns(UserWarning, match=r"runs without the call's LoRAs: LoRA .*base_only.safetensors does not "
                                             r"fit this model"):
            result = pipe(**{**SMALL, "prompt": "a red fox <lora:base_only:1>"}, refiner=refiner)
    finally:
        refiner.unet.forward = original
    assert len(seen) == 2 and all(torch.equal(weight, original_weight) for weight in seen)
    assert "Lora hashes" in result.infotexts[0]  # the base model's steps used it
