"""The call's LoRAs on the refiner: A1111 re-runs setup_conds for the refiner and its Lora extension patches each
refiner layer that carries a network's layer name and fits its shape (others are skipped); here each LoRA acts on the
refiner's layers it fits, and what it leaves out is named in a warning."""

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


def test_a_base_lora_acts_on_the_refiner_layers_it_fits_and_leaves_the_rest_out(tiny_sdxl_dir, tiny_sdxl_refiner_dir,
                                                                                tmp_path):
    from safetensors.torch import load_file

    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.testing.tiny_lora import write_attention_lora
    from pipelines.txt2img import TextToImage

    refiner = load_diffusion_model(tiny_sdxl_refiner_dir)
    loras = tmp_path / "loras"
    loras.mkdir()
    pipe = TextToImage.from_pretrained(tiny_sdxl_dir, lora_dir=loras)
    path = write_attention_lora(pipe.model.unet, loras / "base_only.safetensors")  # SDXL base layers
    tensors = load_file(str(path))
    projections = {name: module for name, module in refiner.unet.named_modules()
                   if isinstance(module, torch.nn.Linear) and name.endswith(("to_q", "to_k", "to_v"))}
    originals = {name: module.weight.detach().clone() for name, module in projections.items()}
    # the oracle: a refiner layer whose kohya name is in the file with the same shape gets up @ down (alpha = rank,
    # strength 1); every other layer keeps its weight
    expected, fitting = {}, 0
    for name, weight in originals.items():
        key = "lora_unet_" + name.replace(".", "_")
        down, up = tensors.get(f"{key}.lora_down.weight"), tensors.get(f"{key}.lora_up.weight")
        fits = down is not None and (up.shape[0], down.shape[1]) == tuple(weight.shape)
        fitting += fits
        expected[name] = weight + up @ down if fits else weight
    file_modules = len([key for key in tensors if key.endswith(".alpha")])
    assert 0 < fitting < file_modules  # the tiny pair shares some layers (names and shapes), not all
    seen = []
    original_forward = refiner.unet.forward

    def spy(*args, **kwargs):
        seen.append({name: module.weight.detach().clone() for name, module in projections.items()})
        return original_forward(*args, **kwargs)

    refiner.unet.forward = spy
    try:
        with pytest.warns(UserWarning, match=rf"LoRA 'base_only' on the refiner .*: acts on {fitting} of its modules "
                                             r"\(A1111 patches the layers a LoRA fits\); left out: lora_unet_"):
            result = pipe(**{**SMALL, "prompt": "a red fox <lora:base_only:1>"}, refiner=refiner)
    finally:
        refiner.unet.forward = original_forward
    assert len(seen) == 2
    for weights in seen:
        for name, weight in weights.items():
            torch.testing.assert_close(weight, expected[name], rtol=1e-5, atol=1e-5)
    assert all(torch.equal(module.weight, originals[name]) for name, module in projections.items())  # removed
    assert "Lora hashes" in result.infotexts[0]
