"""A runtime-mode LoRA on the text encoder writes no parameter, so the prompt encoder's cache (keyed on parameter
versions) used to serve the encodings of before it was applied, and after it was removed (hunt finding): forward
patches now stamp the model, and the stamp is part of the cache key."""

from __future__ import annotations

import numpy as np
import torch
from safetensors.torch import save_file

from mixkit.lora import LoraRequest, apply_loras

SMALL = dict(prompt="a red circle", width=64, height=64, steps=2, seed=3, sampler="Euler")


def _text_encoder_lora(text_encoder, path):
    generator, tensors = torch.Generator().manual_seed(0), {}
    for name, module in text_encoder.named_modules():
        if isinstance(module, torch.nn.Linear) and name.endswith(("q_proj", "v_proj")):
            key = "lora_te_" + name.replace(".", "_")
            tensors[f"{key}.lora_down.weight"] = torch.randn(2, module.in_features, generator=generator)
            tensors[f"{key}.lora_up.weight"] = torch.randn(module.out_features, 2, generator=generator)
            tensors[f"{key}.alpha"] = torch.tensor(2.0)
    save_file(tensors, str(path))
    return path


def _image_with(pipe, lora, mode: str) -> np.ndarray:
    """The pipeline's image while `lora` is applied in `mode` by hand (removed again afterwards)."""
    handle = apply_loras(pipe.model.unet, pipe.model.text_encoders, [LoraRequest(str(lora), 1.0, 1.0)], mode=mode)
    try:
        return np.asarray(pipe(**SMALL).images[0])
    finally:
        handle.remove()


def test_runtime_text_encoder_lora_is_seen_and_its_removal_too(sd1_pipe, tmp_path):
    lora = _text_encoder_lora(sd1_pipe.model.text_encoders[0], tmp_path / "te.safetensors")
    base = np.asarray(sd1_pipe(**SMALL).images[0])
    with_lora = _image_with(sd1_pipe, lora, "runtime")
    expected = _image_with(sd1_pipe, lora, "merge")
    assert np.abs(with_lora.astype(int) - expected.astype(int)).max() <= 2  # runtime = merge, up to rounding
    assert np.abs(with_lora.astype(int) - base.astype(int)).max() > 20
    assert np.array_equal(np.asarray(sd1_pipe(**SMALL).images[0]), base)
