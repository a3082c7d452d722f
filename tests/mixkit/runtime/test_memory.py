import sys

import pytest
import torch

from mixkit.runtime.memory import enable_attention_slicing, enable_offload, enable_vae_tiling, require_accelerate
from mixkit.runtime.report import OptimizationReport


def test_vae_tiling_matches_whole_decode_at_512(tiny_vae_model):
    latents = torch.randn(1, 4, 64, 64, generator=torch.Generator().manual_seed(0))  # a 512x512 image
    with torch.no_grad():
        whole = tiny_vae_model.decode(latents).sample
        report = OptimizationReport("low-memory", "torch")
        enable_vae_tiling(tiny_vae_model, report)
        # tiles of 256 px (32 latents) with diffusers' 25% overlap: a 2x2 grid plus seams
        tiny_vae_model.tile_sample_min_size, tiny_vae_model.tile_latent_min_size = 256, 32
        tiled = tiny_vae_model.decode(latents).sample
    assert report.applied == ["VAE tiling"]
    assert tiled.shape == whole.shape == (1, 3, 512, 512)
    assert not torch.equal(tiled, whole)  # the tiled path really ran
    assert psnr(tiled, whole) >= TILING_MIN_PSNR_DB


def psnr(a: torch.Tensor, b: torch.Tensor, value_range: float = 2.0) -> float:
    return float(10 * torch.log10(value_range ** 2 / ((a - b) ** 2).mean()))


# Tiles are blended, not recomputed: the decoder's group norms see per-tile statistics, so a tiled
# decode is close to, not equal to, the whole one. Measured on this random tiny VAE (4 norm groups,
# far more sensitive than a trained VAE): 30.7 dB with 256-px tiles; the bar leaves room for BLAS noise.
TILING_MIN_PSNR_DB = 28.0


def test_attention_slicing_matches_unsliced(tiny_unet, unet_inputs):
    """A UNet on diffusers' own processors (attention='diffusers') gets diffusers' slicing."""
    from diffusers.models.attention_processor import SlicedAttnProcessor

    with torch.no_grad():
        expected = tiny_unet(*unet_inputs).sample
        report = OptimizationReport("low-memory", "torch")
        enable_attention_slicing(tiny_unet, report)
        got = tiny_unet(*unet_inputs).sample
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert {type(p) for p in tiny_unet.attn_processors.values()} == {SlicedAttnProcessor}
    assert "attention='diffusers'" in report.applied[0]


def test_attention_slicing_keeps_mixkit_processors_on_the_dispatcher(tiny_unet, unet_inputs):
    from mixkit.attention import SlicedMixkitAttnProcessor, apply_to_diffusers, attention_backend

    apply_to_diffusers(tiny_unet)
    with torch.no_grad(), attention_backend("math"):
        expected = tiny_unet(*unet_inputs).sample
        report = OptimizationReport("low-memory", "torch")
        enable_attention_slicing(tiny_unet, report)
        got = tiny_unet(*unet_inputs).sample
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    processors = list(tiny_unet.attn_processors.values())
    assert {type(p) for p in processors} == {SlicedMixkitAttnProcessor} and report.applied == ["attention slicing"]
    heads = [m.heads for m in tiny_unet.modules() if hasattr(m, "heads") and hasattr(m, "processor")]
    assert [p.slice_size for p in processors] == [max(1, h // 2) for h in heads]  # diffusers' "auto": half the heads


def test_attention_slicing_leaves_processors_with_extra_behaviour_and_says_so(tiny_unet):
    from mixkit.attention import SlicedMixkitAttnProcessor, apply_to_diffusers
    from mixkit.runtime.report import RuntimeFallbackWarning

    class CustomProcessor:  # e.g. an IP-Adapter's: slicing must not drop what it does
        def __call__(self, *args, **kwargs):
            raise AssertionError("not called here")

    apply_to_diffusers(tiny_unet)
    custom = CustomProcessor()
    first = next(m for m in tiny_unet.modules() if hasattr(m, "processor"))
    first.set_processor(custom)
    report = OptimizationReport("low-memory", "torch")
    with pytest.warns(RuntimeFallbackWarning, match=r"not applied to 1 attention module\(s\).*CustomProcessor"):
        enable_attention_slicing(tiny_unet, report)
    assert first.processor is custom
    assert sum(isinstance(p, SlicedMixkitAttnProcessor) for p in tiny_unet.attn_processors.values()) > 0


def test_offload_without_accelerate_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "accelerate", None)  # makes `import accelerate` raise ImportError
    with pytest.raises(ImportError, match="accelerate.*pip install accelerate"):
        require_accelerate()


def test_offload_to_cpu_is_refused_and_changes_nothing(tiny_unet):
    class Model:
        unet, vae, text_encoders = tiny_unet, tiny_unet, []

    report = OptimizationReport("low-memory", "torch")
    with pytest.raises(ValueError, match="execution device is the CPU"):
        enable_offload(Model(), "model", "cpu", report)
    assert report.applied == [] and not hasattr(tiny_unet, "_hf_hook")
