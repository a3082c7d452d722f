"""Paging out idle components' memory-mapped weights: resident memory drops, values never change."""

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from mixkit.runtime import RuntimeFallbackWarning, resident_pages
from mixkit.runtime.report import OptimizationReport
from mixkit.runtime.resident_pages import page_out, page_out_supported

needs_pageout = pytest.mark.skipif(not page_out_supported(), reason="needs Linux >= 5.4 (MADV_PAGEOUT)")
MB = 1 << 20


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resident_pages._PAGE


def mapped_linear(path, out_features=4096, in_features=8192) -> torch.nn.Linear:
    """A float16 Linear whose weight is memory-mapped from a safetensors file (as diffusers loads it)."""
    save_file({"weight": torch.randn(out_features, in_features, generator=torch.Generator().manual_seed(0)).half()},
              str(path))
    layer = torch.nn.Linear(in_features, out_features, bias=False, device="meta")
    layer.weight = torch.nn.Parameter(load_file(str(path))["weight"], requires_grad=False)
    return layer


@needs_pageout
def test_page_out_drops_a_mapped_module_from_resident_memory_and_keeps_its_values(tmp_path):
    layer = mapped_linear(tmp_path / "w.safetensors")  # 64 MB of float16
    before_touch = resident_bytes()
    checksum = layer.weight.float().sum().item()  # reading maps the pages in
    touched = resident_bytes()
    assert touched - before_touch > 48 * MB
    assert page_out(layer) > 60 * MB
    assert touched - resident_bytes() > 48 * MB
    assert layer.weight.float().sum().item() == checksum  # re-read from the file: same values


@needs_pageout
def test_pages_a_lora_merge_wrote_to_are_not_lost(tmp_path):
    layer = mapped_linear(tmp_path / "w.safetensors", 1024, 1024)
    with torch.no_grad():
        layer.weight[:8] += 1.0  # copy-on-write: these pages are the process's own now
    expected = layer.weight.clone()
    page_out(layer)
    torch.testing.assert_close(layer.weight, expected, rtol=0, atol=0)


def test_unsupported_kernel_is_a_stated_fallback(monkeypatch, tiny_sd1_dir):
    from pipelines.txt2img import TextToImage

    monkeypatch.setattr(resident_pages, "page_out_supported", lambda: False)
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    report = OptimizationReport("low-memory", "torch")
    with pytest.warns(RuntimeFallbackWarning, match="MADV_PAGEOUT"):
        resident_pages.install_idle_page_out(pipe.model, report)
    assert report.applied == [] and report.fallbacks == ["idle weights not paged out: needs Linux >= 5.4 (MADV_PAGEOUT)"]


@needs_pageout
def test_generation_is_identical_with_idle_components_paged_out(tiny_sd1_dir, monkeypatch):
    from pipelines.optimize import optimize
    from pipelines.txt2img import TextToImage

    calls = []
    monkeypatch.setattr(resident_pages, "page_out", lambda module, _real=resident_pages.page_out: calls.append(
        type(module).__name__) or _real(module))
    call = dict(prompt="a red cube", width=64, height=64, steps=3, seed=5)
    images = []
    for page_out_idle in (False, True):
        pipe = TextToImage.from_pretrained(tiny_sd1_dir, dtype=torch.float16)
        optimize(pipe, "low-memory", page_out_idle=page_out_idle)
        images.append(np.asarray(pipe(**call).images[0]))
    np.testing.assert_array_equal(images[0], images[1])
    # text encoder first (UNet and VAE paged out), then the UNet (text encoder and VAE), then the VAE
    assert calls == ["UNet2DConditionModel", "AutoencoderKL", "CLIPTextModel", "AutoencoderKL",
                     "CLIPTextModel", "UNet2DConditionModel"]


@needs_pageout
def test_page_out_mappings_under_a_folder(tmp_path):
    """What the OpenVINO stand-ins call after compiling: every mapped file under the cache folder goes."""
    from mixkit.runtime.resident_pages import page_out_mappings_under

    (tmp_path / "cache").mkdir()
    layer = mapped_linear(tmp_path / "cache" / "w.safetensors")
    checksum = layer.weight.float().sum().item()
    touched = resident_bytes()
    assert page_out_mappings_under(tmp_path / "cache") > 60 * MB
    assert touched - resident_bytes() > 48 * MB
    assert page_out_mappings_under(tmp_path / "elsewhere") == 0
    assert layer.weight.float().sum().item() == checksum
