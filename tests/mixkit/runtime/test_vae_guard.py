import warnings

import numpy as np
import pytest
import torch

from mixkit.runtime.report import OptimizationReport, RuntimeFallbackWarning
from mixkit.runtime.vae_guard import install_vae_guard, remove_vae_guard


def decode_latents(vae, latents):
    """Per-image decode to uint8, as pipelines.vae_decode does (mixkit tests do not import pipelines)."""
    with torch.inference_mode():
        pixels = [vae.decode(z.unsqueeze(0)).sample.float()[0] for z in latents]
    return [((p / 2 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).numpy() for p in pixels]


def _latents():
    return torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(3))


def _poison_reduced_precision(vae):
    """Make the decoder overflow the way fp16 VAEs do, but only when it computes in reduced precision."""
    def hook(module, inputs, output):
        return output.masked_fill(torch.ones_like(output, dtype=torch.bool), float("nan")) \
            if output.dtype != torch.float32 else output
    return vae.decoder.conv_in.register_forward_hook(hook)


def test_reduced_precision_decode_close_to_fp32(tiny_vae_model):
    reference = [np.asarray(im, dtype=float) for im in decode_latents(tiny_vae_model, _latents())]
    report = OptimizationReport("fast", "torch")
    install_vae_guard(tiny_vae_model, torch.bfloat16, report)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeFallbackWarning)
        images = [np.asarray(im, dtype=float) for im in decode_latents(tiny_vae_model, _latents())]
    assert report.nan_fallbacks == 0
    for got, expected in zip(images, reference):
        assert np.abs(got - expected).max() <= 8  # bf16 has 8 mantissa bits: a few levels of 255
        assert np.abs(got - expected).mean() <= 1.5


def test_nan_in_reduced_precision_falls_back_to_fp32_per_image(tiny_vae_model):
    reference = [np.asarray(im) for im in decode_latents(tiny_vae_model, _latents())]
    report = OptimizationReport("fast", "torch")
    install_vae_guard(tiny_vae_model, torch.bfloat16, report)
    handle = _poison_reduced_precision(tiny_vae_model)
    with pytest.warns(RuntimeFallbackWarning, match="NaN/inf.*float32"):
        images = [np.asarray(im) for im in decode_latents(tiny_vae_model, _latents())]
    handle.remove()
    assert report.nan_fallbacks == 2  # one per image
    for got, expected in zip(images, reference):
        np.testing.assert_array_equal(got, expected)  # the fallback is the exact fp32 decode


def test_remove_guard_restores_class_decode(tiny_vae_model):
    install_vae_guard(tiny_vae_model, torch.bfloat16)
    assert "decode" in tiny_vae_model.__dict__
    remove_vae_guard(tiny_vae_model)
    assert "decode" not in tiny_vae_model.__dict__
