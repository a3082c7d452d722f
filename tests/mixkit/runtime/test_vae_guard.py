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


def _spy(vae, calls: list):
    """A decode spy as tests write them: wraps whatever `decode` is there now, counts calls."""
    saved = vae.decode

    def spy(z, *args, **kwargs):
        calls.append(z.shape[0])
        return saved(z, *args, **kwargs)

    vae.decode = spy
    return spy


def test_a_spy_installed_before_the_guard_is_what_removal_puts_back(tiny_vae_model):
    calls = []
    spy = _spy(tiny_vae_model, calls)
    install_vae_guard(tiny_vae_model, torch.bfloat16)
    decode_latents(tiny_vae_model, _latents())
    assert calls == [1, 1]  # the guard calls the spy below it
    assert remove_vae_guard(tiny_vae_model) is True
    assert tiny_vae_model.__dict__["decode"] is spy  # the old removal deleted it
    del tiny_vae_model.decode


def test_under_a_spy_the_removed_guard_passes_through_and_the_spy_stays(tiny_vae_model):
    reference = decode_latents(tiny_vae_model, _latents())
    report = OptimizationReport("fast", "torch")
    install_vae_guard(tiny_vae_model, torch.bfloat16, report)
    handle = _poison_reduced_precision(tiny_vae_model)  # a guarded decode would fall back, and count it
    calls = []
    spy = _spy(tiny_vae_model, calls)
    try:
        remove_vae_guard(tiny_vae_model)
        images = decode_latents(tiny_vae_model, _latents())
    finally:
        handle.remove()
    assert tiny_vae_model.__dict__["decode"] is spy and calls == [1, 1]
    assert report.nan_fallbacks == 0  # the guard no longer runs: the plain fp32 decode did
    for got, expected in zip(images, reference):
        np.testing.assert_array_equal(got, expected)
    del tiny_vae_model.decode


def test_installing_again_replaces_only_the_guard(tiny_vae_model):
    calls = []
    install_vae_guard(tiny_vae_model, torch.bfloat16)
    spy = _spy(tiny_vae_model, calls)
    install_vae_guard(tiny_vae_model, torch.bfloat16)  # the first guard comes out from under the spy
    decode_latents(tiny_vae_model, _latents())
    assert calls == [1, 1] and tiny_vae_model.__dict__["decode"] is not spy
    remove_vae_guard(tiny_vae_model)
    assert tiny_vae_model.__dict__["decode"] is spy
    del tiny_vae_model.decode


def test_a_decode_failing_half_way_leaves_the_guard_in_place_and_removable(tiny_vae_model):
    reference = decode_latents(tiny_vae_model, _latents())
    install_vae_guard(tiny_vae_model, torch.bfloat16)

    def fail(module, inputs, output):
        raise RuntimeError("out of memory in the up-blocks")

    handle = tiny_vae_model.decoder.conv_in.register_forward_hook(fail)
    with pytest.raises(RuntimeError, match="out of memory"):
        decode_latents(tiny_vae_model, _latents())
    handle.remove()
    assert np.abs(np.asarray(decode_latents(tiny_vae_model, _latents())[0], dtype=float)
                  - np.asarray(reference[0], dtype=float)).max() <= 8  # still the guarded bf16 decode
    assert remove_vae_guard(tiny_vae_model) is True and remove_vae_guard(tiny_vae_model) is False
    assert "decode" not in tiny_vae_model.__dict__
    for got, expected in zip(decode_latents(tiny_vae_model, _latents()), reference):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, "bfloat16"])
def test_a_dtype_other_than_half_precision_is_refused_and_nothing_changes(tiny_vae_model, dtype):
    with pytest.raises(ValueError, match=r"dtype must be one of \['torch.float16', 'torch.bfloat16'\]"):
        install_vae_guard(tiny_vae_model, dtype)
    assert "decode" not in tiny_vae_model.__dict__


def test_a_module_without_decode_is_refused():
    with pytest.raises(TypeError, match="needs a VAE module with a decode method"):
        install_vae_guard(torch.nn.Linear(2, 2), torch.bfloat16)
