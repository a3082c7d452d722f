"""approximate(pipe, int8=...) on the torch backend: torchao PT2E quantization, compiled by inductor."""

import numpy as np
import pytest
import torch

pytest.importorskip("torchao", reason="torchao not installed: pip install 'mixkit[int8]'")

from mixkit.runtime.torch_int8 import TorchInt8UNet, kept_module_names  # noqa: E402
from pipelines.approx import Int8Calibration, approximate, model_labels, remove_approximations  # noqa: E402
from pipelines.infotext import parse_optimization  # noqa: E402
from pipelines.txt2img import TextToImage  # noqa: E402

CALIBRATION = Int8Calibration(prompts=("a cube", "a red ball on grass", "a green tree"), width=64, height=64, steps=4,
                              cfg_scale=7.0)
RUN = dict(prompt="a blue cube", width=64, height=64, steps=4, seed=5, cfg_scale=7.0)


@pytest.fixture(scope="module")
def pipe(tiny_sd1_dir):
    return TextToImage.from_pretrained(tiny_sd1_dir)


@pytest.fixture(scope="module")
def float_state(pipe):
    return pipe.model.unet, np.asarray(pipe(**RUN).images[0])


@pytest.fixture(scope="module")
def quantized(pipe, float_state):
    report = approximate(pipe, int8=CALIBRATION)
    return report, pipe(**RUN)


def test_the_unet_becomes_a_compiled_int8_graph_that_keeps_the_float_one(pipe, float_state, quantized):
    unet = pipe.model.unet
    assert isinstance(unet, TorchInt8UNet) and unet.float_unet is float_state[0]
    graph = unet._compiled._orig_mod
    targets = {str(node.target) for node in graph.graph.nodes}
    assert any("quantize_per_tensor" in t for t in targets) and any("dequantize_per_channel" in t for t in targets)
    assert unet.shapes == ((2, 4, 8, 8), (2,), (2, 77, pipe.model.unet.config.cross_attention_dim))


def test_the_kept_layers_are_the_edges_and_the_skip_shortcuts(float_state):
    names = kept_module_names(float_state[0])
    assert {"conv_in", "conv_out", "time_embedding.linear_1", "time_embedding.linear_2"} <= set(names)
    assert any(n.endswith("time_emb_proj") for n in names) and any(n.endswith("conv_shortcut") for n in names)
    assert not any(n.endswith(("conv1", "conv2", "to_q", "proj_in")) for n in names)


def test_the_int8_image_is_close_to_the_float_one_and_labelled(float_state, quantized):
    report, result = quantized
    image = np.asarray(result.images[0]).astype(np.float64)
    mse = np.mean((image - float_state[1]) ** 2)
    assert 0 < mse and 10 * np.log10(255 ** 2 / mse) > 15  # random tiny weights; trained-model figures in the README
    assert report.int8 and "int8 UNet (torch: PT2E X86InductorQuantizer" in report.warning()
    assert parse_optimization(result.infotexts[0]).int8


def test_another_size_is_a_clear_error_and_changes_nothing(pipe, quantized):
    unet = pipe.model.unet
    with pytest.raises(ValueError, match=r"calibrated and compiled for UNet inputs of shapes .* this call has"):
        pipe(**{**RUN, "width": 96})
    assert pipe.model.unet is unet


def test_a_step_without_the_negative_prompt_runs_padded_to_the_compiled_batch(pipe, quantized):
    unet = pipe.model.unet
    sample, context = torch.randn(*unet.shapes[0]), torch.randn(*unet.shapes[2])
    both = unet(sample, 500, encoder_hidden_states=context).sample
    first = unet(sample[:1], 500, encoder_hidden_states=context[:1]).sample  # NGMS: the prompt row alone
    assert first.shape == both[:1].shape
    torch.testing.assert_close(first, both[:1], rtol=0, atol=1e-6)  # static quantization: rows are independent
    result = pipe(**RUN, s_min_uncond=15.0)
    assert parse_optimization(result.infotexts[0]).int8 and "NGMS: 15" in result.infotexts[0]


def test_int8_with_deepcache_or_tome_is_refused(pipe, quantized):
    unet = pipe.model.unet
    with pytest.raises(ValueError, match="use backend 'openvino' for int8 with DeepCache"):
        approximate(pipe, int8=CALIBRATION, deepcache=2)
    with pytest.raises(ValueError, match="ToMe .*cannot be combined with it"):
        approximate(pipe, int8=CALIBRATION, tome=0.5)
    assert pipe.model.unet is unet


def test_a_failed_quantization_leaves_the_model_as_it_was(pipe, quantized, monkeypatch):
    unet, labels = pipe.model.unet, model_labels(pipe.model)
    monkeypatch.setattr("mixkit.runtime.torch_int8.quantize_unet", lambda *a: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="boom"):
        approximate(pipe, int8=Int8Calibration(prompts=("a sphere",), width=64, height=64, steps=2))
    assert pipe.model.unet is unet and model_labels(pipe.model) == labels
    assert not unet.float_unet._forward_pre_hooks  # the recording hook is gone


def test_a_failed_quantization_puts_back_the_deepcache_and_tome_it_found(tiny_sd1_dir, monkeypatch):
    from pipelines.approx.deepcache import deepcache_state
    from pipelines.approx.tome_unet import token_merging_state

    fresh = TextToImage.from_pretrained(tiny_sd1_dir)
    approximate(fresh, deepcache=3, tome=0.5, deepcache_shallow_layers=2)
    unet, labels = fresh.model.unet, model_labels(fresh.model)
    before = fresh(**RUN).images[0]
    monkeypatch.setattr("pipelines.approx.apply.install_int8", lambda *a: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="boom"):
        approximate(fresh, int8=CALIBRATION)
    assert fresh.model.unet is unet and model_labels(fresh.model) == labels
    assert deepcache_state(unet).settings.interval == 3 and deepcache_state(unet).settings.shallow_layers == 2
    assert token_merging_state(unet).settings.ratio == 0.5
    assert np.array_equal(np.asarray(fresh(**RUN).images[0]), np.asarray(before))  # and they still run as before


def test_a_compile_failure_falls_back_to_the_eager_int8_graph_with_a_warning(pipe, quantized, monkeypatch):
    from mixkit.runtime.report import RuntimeFallbackWarning

    unet = pipe.model.unet
    expected = unet._graph

    def broken(*inputs):
        raise RuntimeError("no C++ compiler")
    monkeypatch.setattr(unet, "_compiled", broken)
    monkeypatch.setattr(unet, "compile_failure", None)
    sample = torch.randn(*unet.shapes[0])
    context = torch.randn(*unet.shapes[2])
    with pytest.warns(RuntimeFallbackWarning, match="compiling the int8 UNet failed .*no C\\+\\+ compiler"):
        out = unet(sample, 500, context).sample
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=unet.autocast_bf16):
        reference = expected(sample, torch.full((2,), 500.0), context).float()
    torch.testing.assert_close(out, reference)
    assert "no C++ compiler" in unet.compile_failure


def test_remove_approximations_puts_the_float_unet_back_bit_for_bit(pipe, float_state, quantized):
    remove_approximations(pipe)
    assert pipe.model.unet is float_state[0] and not model_labels(pipe.model).approximate
    assert np.array_equal(np.asarray(pipe(**RUN).images[0]), float_state[1])


def test_a_compiled_unet_is_refused(tiny_sd1_dir):
    compiled = TextToImage.from_pretrained(tiny_sd1_dir)
    compiled.model.unet.__dict__["_mixkit_eager_forward"] = compiled.model.unet.forward
    with pytest.raises(ValueError, match="int8 compiles its own graph; drop compile=True"):
        approximate(compiled, int8=True)


def test_missing_torchao_names_what_to_install(tiny_sd1_dir, monkeypatch):
    import sys

    plain = TextToImage.from_pretrained(tiny_sd1_dir)
    monkeypatch.setitem(sys.modules, "torchao", None)
    with pytest.raises(ImportError, match=r"int8 on the torch backend needs torchao: pip install torchao"):
        approximate(plain, int8=True)
    assert isinstance(plain.model.unet, torch.nn.Module)

