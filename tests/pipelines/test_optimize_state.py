"""optimize() changes a model once, completely or not at all, and its labels say what the model is.

Covers: a refused call (up-front checks, incl. offload on the CPU) and a call that fails half-way
leave weights, processors, VAE flags, hooks and the image exactly as before; a second, different
optimize() is refused; optimize() over approximations is refused; attention slicing stays on
mixkit's dispatcher; VAE tiling is opt-in and labelled approximate.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from mixkit.attention import SlicedMixkitAttnProcessor, attention_backend
from mixkit.attention.registry import ATTENTION_BACKENDS, AttentionBackend
from mixkit.attention.math_attention import math_attention
from pipelines.approx import approximate, model_labels, remove_approximations
from pipelines.approx.tome_unet import token_merging_state
from pipelines.infotext import parse_optimization
from pipelines.optimize import optimize
from pipelines.txt2img import TextToImage

CALL = dict(prompt="a red cube", negative_prompt="blurry", width=64, height=64, steps=3, seed=7, cfg_scale=7.0)


@pytest.fixture(scope="module")
def reference(tiny_sd1_dir):
    result = TextToImage.from_pretrained(tiny_sd1_dir)(**CALL)
    return np.asarray(result.images[0]), result.infotexts[0]


def model_state(model) -> dict:
    """Everything optimize() may change, by identity: tensors, layouts, processors, VAE flags, hooks, modules."""
    from diffusers.models.attention_processor import Attention

    parts = {"unet": model.unet, "vae": model.vae, **{f"te{i}": e for i, e in enumerate(model.text_encoders)}}
    state = {"types": {name: type(part).__name__ for name, part in parts.items()}, "extras": sorted(model.extras)}
    for name, part in parts.items():
        state[f"{name}.tensors"] = [(key, t.dtype, t.data_ptr(), t.stride()) for key, t in
                                    [*part.named_parameters(), *part.named_buffers()]]
        state[f"{name}.modules"] = [key for key, _ in part.named_modules()]
        state[f"{name}.hooks"] = [(key, len(m._forward_pre_hooks), len(m._forward_hooks), "forward" in m.__dict__,
                                   "_diffusers_hook" in m.__dict__, "_hf_hook" in m.__dict__)
                                  for key, m in part.named_modules()]
        state[f"{name}.processors"] = [type(m.processor).__name__ for m in part.modules() if isinstance(m, Attention)]
    state["vae.flags"] = (model.vae.use_tiling, model.vae.use_slicing, "decode" in model.vae.__dict__)
    return state


def assert_unchanged(pipe, before: dict, reference) -> None:
    assert model_state(pipe.model) == before
    assert not hasattr(pipe, "optimization")
    result = pipe(**CALL)
    np.testing.assert_array_equal(np.asarray(result.images[0]), reference[0])
    assert result.infotexts[0] == reference[1] and "Optimization" not in result.infotexts[0]


def test_offload_on_the_cpu_is_refused_before_any_change(tiny_sd1_dir, reference):
    pytest.importorskip("accelerate")
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    before = model_state(pipe.model)
    with pytest.raises(ValueError, match="offload='model'.*execution device is the CPU.*without offload on the CPU"):
        optimize(pipe, "low-memory", offload="model")
    assert_unchanged(pipe, before, reference)


def test_offload_to_a_missing_gpu_is_refused_before_any_change(tiny_sd1_dir, reference):
    pytest.importorskip("accelerate")
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    before = model_state(pipe.model)
    with pytest.raises(ValueError, match="cuda:7: that CUDA device is not available"):
        optimize(pipe, "low-memory", offload="sequential", execution_device="cuda:7")
    with pytest.raises(ValueError, match="execution_device='nonsense' is not a torch device"):
        optimize(pipe, "low-memory", offload="model", execution_device="nonsense")
    assert_unchanged(pipe, before, reference)


def _fail_after(real):
    def step(*args, **kwargs):
        real(*args, **kwargs)  # the step does its work, then something after it fails
        raise RuntimeError("injected failure")
    return step


@pytest.mark.parametrize("preset, overrides, target", [
    # weight storage, attention slicing, VAE tiling/slicing, page-out hooks done; the last step fails
    ("low-memory", dict(vae_tiling=True), "mixkit.runtime.apply.install_idle_page_out"),
    # channels-last and fused QKV (new modules, parameters replaced by views) done; compile fails
    ("fast", dict(compile=True), "mixkit.runtime.backends.compile_module"),
])
def test_a_failure_half_way_puts_everything_back(tiny_sd1_dir, reference, monkeypatch, preset, overrides, target):
    import importlib

    module_name, attribute = target.rsplit(".", 1)
    monkeypatch.setattr(target, _fail_after(getattr(importlib.import_module(module_name), attribute)))
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    before = model_state(pipe.model)
    with pytest.raises(RuntimeError, match="injected failure"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fast on a CPU without bf16 warns that it stays fp32
        optimize(pipe, preset, **overrides)
    assert_unchanged(pipe, before, reference)
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optimize(pipe, preset, **overrides)  # the model is fit for a real optimisation afterwards
    assert model_state(pipe.model) != before


def test_a_second_different_optimize_is_refused_and_labels_stay_true(tiny_sd1_dir):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    report = optimize(pipe, "low-memory")
    labelled = pipe(**CALL).infotexts[0]
    state = model_state(pipe.model)
    for preset, backend in [("exact", "torch"), ("fast", "torch"), ("low-memory", "torch.compile")]:
        with pytest.raises(ValueError, match=f"already optimised with preset 'low-memory' on backend 'torch'.*"
                                             f"preset '{preset}' on backend '{backend}' is refused.*Load the model again"):
            optimize(pipe, preset, backend)
    assert model_state(pipe.model) == state and pipe.optimization is report
    assert pipe(**CALL).infotexts[0] == labelled and 'Optimization: "low-memory' in labelled
    assert optimize(pipe, "low-memory") is report  # the very same request again: nothing to do


def test_exact_on_torch_changes_nothing_so_a_preset_may_follow(tiny_sd1_dir):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    optimize(pipe, "exact")
    report = optimize(pipe, "low-memory")
    assert pipe.optimization is report and report.preset == "low-memory"
    assert parse_optimization(pipe(**CALL).infotexts[0]).exact[0] == "low-memory"


def test_a_converted_model_is_refused_with_a_reload_hint(tiny_sd1_dir):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    pipe.model.extras["execution_backend"] = "openvino"  # what the openvino backend records
    with pytest.raises(ValueError, match="already runs on the 'openvino' backend.*load the model again"):
        optimize(pipe, "fast")


def test_optimize_after_openvino_is_a_clear_error(tiny_sd1_dir, tmp_path):
    pytest.importorskip("openvino")
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    optimize(pipe, "exact", "openvino", cache_dir=tmp_path)
    labelled = pipe(**CALL).infotexts[0]
    for preset, backend in [("fast", "torch"), ("exact", "torch")]:
        with pytest.raises(ValueError, match="preset 'exact' on backend 'openvino'.*Load the model again"):
            optimize(pipe, preset, backend)
    assert pipe(**CALL).infotexts[0] == labelled and 'Optimization: "exact, openvino"' in labelled


def test_optimize_over_approximations_is_refused_and_they_keep_working(tiny_sd1_dir):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    approximate(pipe, tome=0.5)
    labels = model_labels(pipe.model)
    state = model_state(pipe.model)
    with pytest.raises(ValueError, match=r"approximations are installed on this model \(ToMe ratio 0.5\).*"
                                         r"remove_approximations\(pipe\), then optimize\(pipe, 'low-memory'\)"):
        optimize(pipe, "low-memory")
    assert model_state(pipe.model) == state and model_labels(pipe.model) == labels
    run = token_merging_state(pipe.model.unet)
    pipe(**CALL)
    assert run.merged_layers > 0
    # the documented order: optimise first, approximate last; ToMe then wraps the sliced processors
    remove_approximations(pipe)
    optimize(pipe, "low-memory")
    approximate(pipe, tome=0.5)
    run = token_merging_state(pipe.model.unet)
    result = pipe(**CALL)
    assert run.merged_layers > 0
    assert parse_optimization(result.infotexts[0]).tome == 0.5


@pytest.fixture
def spy_backend(monkeypatch):
    calls = []

    def kernel(q, k, v, **kwargs):
        calls.append(tuple(q.shape))
        return math_attention(q, k, v, **kwargs)

    monkeypatch.setitem(ATTENTION_BACKENDS._entries, "spy", AttentionBackend(name="spy", fn=kernel, description="test"))
    return calls


def test_attention_slicing_stays_on_the_dispatcher(tiny_sd1_dir, reference, spy_backend):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    with attention_backend("spy"):
        unsliced = np.asarray(pipe(**CALL).images[0]).astype(float)
    unsliced_calls = len(spy_backend)
    spy_backend.clear()
    optimize(pipe, "exact", attention_slicing=True)
    processors = {type(m.processor) for m in pipe.model.unet.modules() if hasattr(m, "processor")}
    assert processors == {SlicedMixkitAttnProcessor}
    with attention_backend("spy"):
        sliced = np.asarray(pipe(**CALL).images[0]).astype(float)
    # every UNet attention call still reaches the named backend, now in slices of half the heads
    assert len(spy_backend) > unsliced_calls
    assert np.abs(sliced - unsliced).max() <= 1
    assert np.abs(sliced - reference[0].astype(float)).max() <= 1
    assert pipe.model.extras["attention"].startswith("attention=auto (unet: ")  # still true


def test_low_memory_does_not_tile_and_opt_in_tiling_is_labelled_approximate(tiny_sd1_dir):
    big = {**CALL, "width": 128, "height": 128}  # twice the tiny VAE's native 64 px: tiling engages
    plain = TextToImage.from_pretrained(tiny_sd1_dir, dtype=torch.float16)
    low = TextToImage.from_pretrained(tiny_sd1_dir, dtype=torch.float16)
    optimize(low, "low-memory")
    assert not low.model.vae.use_tiling
    tiled = TextToImage.from_pretrained(tiny_sd1_dir, dtype=torch.float16)
    optimize(tiled, "low-memory", vae_tiling=True)
    optimize(plain, "low-memory", vae_slicing=False, attention_slicing=False, page_out_idle=False)
    exact_image = np.asarray(plain(**big).images[0]).astype(float)
    low_result, tiled_result = low(**big), tiled(**big)
    assert np.abs(np.asarray(low_result.images[0]).astype(float) - exact_image).max() <= 1
    assert np.abs(np.asarray(tiled_result.images[0]).astype(float) - exact_image).max() > 10  # not rounding
    low_labels = parse_optimization(low_result.infotexts[0])
    tiled_labels = parse_optimization(tiled_result.infotexts[0])
    assert not low_labels.approximate and "vae-tiling" not in low_labels.exact
    assert tiled_labels.approximate and tiled_labels.vae_tiling == 64 and "VAE tiling: 64" in tiled_result.infotexts[0]
    assert "VAE tiling (images above 64 px" in tiled_labels.approximations()[0]
