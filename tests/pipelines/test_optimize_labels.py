"""The infotext's `Optimization:` names what ran, and optimize()'s checks run in the order that gives the useful error.

A1111 writes the settings an image was made with, not the ones asked for (its infotext is filled
from `p`/`opts` after processing, modules/processing.py `create_infotext`); mixkit follows that
rule for its own `Optimization:` key: a step a backend skipped, or a fallback replaced, is not named.
"""

import sys

import pytest
import torch

from pipelines.infotext import parse_optimization
from pipelines.optimize import optimize
from pipelines.txt2img import TextToImage

CALL = dict(prompt="a red cube", width=64, height=64, steps=2, seed=7)


def test_openvino_label_names_neither_channels_last_nor_fused_qkv(tiny_sd1_dir, tmp_path):
    pytest.importorskip("openvino", reason="openvino not installed: pip install 'mixkit[openvino]'")
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    report = optimize(pipe, "fast", backend="openvino", cache_dir=tmp_path / "ov")
    assert not any("channels-last" in step or "fused QKV" in step for step in report.applied)
    precision = {"bfloat16": ("bf16",), "float16": ("fp16",)}.get(report.precision, ())
    labels = parse_optimization(pipe(**CALL).infotexts[0])
    assert labels.exact == ("fast", *precision, "openvino")


def test_page_out_that_fell_back_is_not_labelled(tiny_sd1_dir, monkeypatch):
    import mixkit.runtime.resident_pages as resident_pages

    monkeypatch.setattr(resident_pages, "page_out_supported", lambda: False)  # a kernel without MADV_PAGEOUT
    pipe = TextToImage.from_pretrained(tiny_sd1_dir, dtype=torch.float16)
    with pytest.warns(UserWarning, match="idle weights not paged out"):
        report = optimize(pipe, "low-memory")
    assert report.labels == ["fp16-weights", "attention-slicing", "vae-slicing"]
    assert parse_optimization(pipe(**CALL).infotexts[0]).exact == (
        "low-memory", "attention-slicing", "vae-slicing", "fp16-weights")


def test_fast_on_torch_keeps_its_label(tiny_sd1_dir, monkeypatch):
    import mixkit.runtime.capability as capability

    monkeypatch.setattr(capability, "cpu_has_native_bf16", lambda flags=None: False)  # the same label on every CPU
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    with pytest.warns(UserWarning, match="reduced precision not used"):
        optimize(pipe, "fast")
    assert parse_optimization(pipe(**CALL).infotexts[0]).exact == ("fast", "channels-last", "fused-qkv")


def test_offload_on_the_cpu_without_accelerate_names_the_device_not_the_package(tiny_sd1_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "accelerate", None)  # accelerate not installed
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    with pytest.raises(ValueError, match="execution device is the CPU"):
        optimize(pipe, "low-memory", offload="model")
    assert pipe.model.unet.dtype == torch.float32 and not hasattr(pipe, "optimization")


def test_offload_to_a_gpu_without_accelerate_asks_for_it(tiny_sd1_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "accelerate", None)
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a usable GPU: only accelerate is missing
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ImportError, match="pip install accelerate"):
        optimize(pipe, "low-memory", offload="model", execution_device="cuda")
    assert pipe.model.unet.dtype == torch.float32 and not hasattr(pipe, "optimization")


def test_compile_failing_on_first_use_is_labelled_as_the_eager_run_it_became(tiny_sd1_dir, monkeypatch):
    """QA: a compiled UNet that fails on its first call runs eager for good, but the infotext and
    `pipe.optimization.backend` still said torch.compile, for that image and every later one."""
    plain = TextToImage.from_pretrained(tiny_sd1_dir)(**CALL)

    def lazily_broken_compile(fn, **kwargs):  # what a missing C++ compiler does: fails on the first call
        def compiled(*args, **kw):
            raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found")
        return compiled

    monkeypatch.setattr(torch, "compile", lazily_broken_compile)
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    report = optimize(pipe, "exact", compile=True)
    assert report.backend == "torch.compile"
    with pytest.warns(UserWarning, match="compiled UNet failed on first use.*eager"):
        first = pipe(**CALL)
    second = pipe(**CALL)
    assert pipe.optimization.backend == "torch" and len(pipe.optimization.fallbacks) == 1
    for result in (first, second):  # eager `exact` is the unoptimised pipeline: same image, same infotext
        assert result.infotexts == plain.infotexts and "Optimization" not in result.infotexts[0]
        assert [image.tobytes() for image in result.images] == [image.tobytes() for image in plain.images]
