"""approximate(pipe, int8=...): the OpenVINO UNet graph quantized by NNCF, calibrated by the pipeline itself."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("openvino", reason="openvino not installed: pip install 'mixkit[openvino]'")
pytest.importorskip("nncf", reason="nncf not installed: pip install 'mixkit[openvino]'")

import openvino as ov  # noqa: E402

from mixkit.models.diffusion.recommended import RecommendedSettings  # noqa: E402
from pipelines.approx import (DEFAULT_CALIBRATION_PROMPTS, Int8Calibration, approximate,  # noqa: E402
                              model_labels, remove_approximations)
from pipelines.approx.int8 import calibration_params  # noqa: E402
from pipelines.infotext import parse_optimization  # noqa: E402
from pipelines.optimize import optimize  # noqa: E402
from pipelines.txt2img import TextToImage  # noqa: E402

CALIBRATION = Int8Calibration(prompts=("a cube", "a red ball on grass"), width=64, height=64, steps=3, cfg_scale=7.0)
RUN = dict(prompt="a blue cube", width=64, height=64, steps=3, seed=5, cfg_scale=7.0)


def fake_quantize_inputs(graph) -> set[str]:
    """Friendly names of the layers whose inputs pass through a FakeQuantize node."""
    names = set()
    for op in graph.get_ordered_ops():
        if op.get_type_name() == "FakeQuantize":
            for target in op.output(0).get_target_inputs():
                names.add(target.get_node().get_friendly_name())
    return names


@pytest.fixture(scope="module")
def pipe(tiny_sd1_dir, tmp_path_factory):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    optimize(pipe, "exact", "openvino", cache_dir=tmp_path_factory.mktemp("ov-int8"))
    return pipe


@pytest.fixture(scope="module")
def float_image(pipe):
    return np.asarray(pipe(**RUN).images[0])


@pytest.fixture(scope="module")
def quantized(pipe, float_image):
    report = approximate(pipe, int8=CALIBRATION)
    return report, pipe(**RUN)


def test_int8_graph_quantizes_the_heavy_layers_and_keeps_the_edges_in_float(pipe, quantized):
    unet = pipe.model.unet
    assert unet.int8_path is not None and unet.int8_path.exists() and unet.int8_path.with_suffix(".bin").exists()
    quantized_layers = fake_quantize_inputs(unet.graph)
    assert any("resnets.0.conv1" in name for name in quantized_layers)
    assert any("attn1.to_q" in name for name in quantized_layers)
    for kept in ("conv_in", "conv_out", "time_embedding", "time_emb_proj", "conv_shortcut"):
        assert not any(f".{kept}" in name for name in quantized_layers), kept


def test_int8_decoder_quantizes_its_convolutions_and_keeps_the_edges_in_float(pipe, quantized):
    vae = pipe.model.vae
    path = vae.int8_decoder_path
    assert path is not None and path.exists() and path.with_suffix(".bin").exists()
    assert path.name.startswith("vae-decoder-int8-")
    quantized_layers = fake_quantize_inputs(vae.int8_decoder_graph)
    assert any("up_blocks.0.resnets.0.conv1" in name for name in quantized_layers)
    for kept in ("post_quant_conv", "decoder.conv_in", "decoder.conv_out"):
        assert not any(kept in name for name in quantized_layers), kept


def test_int8_image_is_close_to_the_float_one_and_labelled(float_image, quantized):
    report, result = quantized
    image = np.asarray(result.images[0]).astype(np.float64)
    mse = np.mean((image - float_image) ** 2)
    assert 0 < mse  # quantized: not the float graph
    assert 10 * np.log10(255 ** 2 / mse) > 20  # random tiny weights; the trained model's figure is in the README
    assert report.int8 and report.int8_vae and report.approximate
    assert "int8 UNet and VAE decoder" in report.warning()
    assert "calibrated on 2 prompt(s) x 3 steps at 64x64" in report.applied[0]
    labels = parse_optimization(result.infotexts[0])
    assert labels.int8 and labels.int8_vae and labels.approximate
    assert "UNet quantization: int8" in result.infotexts[0] and "VAE quantization: int8" in result.infotexts[0]


def test_remove_approximations_restores_the_float_graphs_bit_for_bit(pipe, float_image, quantized):
    remove_approximations(pipe)
    try:
        assert pipe.model.unet.int8_path is None and pipe.model.vae.int8_decoder_path is None
        assert not model_labels(pipe.model).approximate
        result = pipe(**RUN)
        assert np.array_equal(np.asarray(result.images[0]), float_image)
        assert "quantization" not in result.infotexts[0]
    finally:
        approximate(pipe, int8=CALIBRATION)


def test_same_calibration_reuses_the_cached_graphs_without_running_the_pipeline(pipe, quantized, monkeypatch):
    paths = pipe.model.unet.int8_path, pipe.model.vae.int8_decoder_path
    remove_approximations(pipe)
    monkeypatch.setattr(pipe.model.unet, "recording", lambda: pytest.fail("calibration ran on a cache hit"))
    monkeypatch.setattr("mixkit.runtime.openvino_int8.quantize_graph", lambda *a: pytest.fail("quantized again"))
    report = approximate(pipe, int8=CALIBRATION)
    assert (pipe.model.unet.int8_path, pipe.model.vae.int8_decoder_path) == paths and "cached" in report.applied[0]


def test_vae_decoder_false_keeps_the_decoder_in_float_and_a_later_run_adds_it(pipe, quantized, monkeypatch):
    from mixkit.runtime import openvino_int8

    calibration = Int8Calibration(prompts=("a green cone",), width=64, height=64, steps=2, cfg_scale=7.0)
    try:
        report = approximate(pipe, int8=replace(calibration, vae_decoder=False))
        assert pipe.model.vae.int8_decoder_path is None and report.int8 and not report.int8_vae
        assert "int8 UNet (" in report.applied[0]
        labels = parse_optimization(pipe(**RUN).infotexts[0])
        assert labels.int8 and not labels.int8_vae
        # Same settings with the decoder: the UNet graph comes from the cache, calibration runs once for the decoder.
        quantized_parts = []
        real = openvino_int8.quantize_graph

        def spy(graph, calibration, *args):
            quantized_parts.append((args[-1] if args else "UNet", len(calibration)))
            return real(graph, calibration, *args)
        monkeypatch.setattr(openvino_int8, "quantize_graph", spy)
        report = approximate(pipe, int8=calibration)
        assert quantized_parts == [("VAE decoder", 1)]  # one image's latents
        assert pipe.model.vae.int8_decoder_path is not None and report.int8_vae
        assert "calibrated on 1 prompt(s) x 2 steps" in report.applied[0]
    finally:
        approximate(pipe, int8=CALIBRATION)


def test_a_failed_decoder_quantization_leaves_the_model_as_it_was(pipe, quantized, monkeypatch):
    from mixkit.runtime import openvino_int8

    unet, vae = pipe.model.unet, pipe.model.vae
    before = (unet.graph, unet.int8_path, vae.int8_decoder_graph, vae.int8_decoder_path, model_labels(pipe.model))
    real = openvino_int8.quantize_graph

    def broken(graph, calibration, *args):
        if args and args[-1] == "VAE decoder":
            raise RuntimeError("nncf broke on the decoder")
        return real(graph, calibration, *args)
    monkeypatch.setattr(openvino_int8, "quantize_graph", broken)
    with pytest.raises(RuntimeError, match="nncf broke on the decoder"):
        approximate(pipe, int8=Int8Calibration(prompts=("a pyramid",), width=64, height=64, steps=2))
    assert (unet.graph, unet.int8_path, vae.int8_decoder_graph, vae.int8_decoder_path,
            model_labels(pipe.model)) == before
    assert not list(vae.cache_dir.glob("*.tmp.*"))


def test_vae_decoder_true_is_refused_where_it_cannot_run(pipe, quantized, tiny_sd1_dir, tiny_taesd_dir):
    with pytest.raises(ValueError, match="TAESD replaces the VAE decoder"):
        approximate(pipe, taesd=str(tiny_taesd_dir), int8=replace(CALIBRATION, vae_decoder=True))
    assert pipe.model.vae.int8_decoder_path is not None and model_labels(pipe.model).int8_vae
    torch_pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    with pytest.raises(ValueError, match="vae_decoder=True runs on the openvino backend only"):
        approximate(torch_pipe, int8=Int8Calibration(vae_decoder=True))
    assert not model_labels(torch_pipe.model).approximate
    with pytest.raises(ValueError, match="vae_decoder must be None, True or False"):
        Int8Calibration(vae_decoder="yes")


def test_taesd_with_int8_leaves_the_decoder_alone_and_calibrates_on_the_real_decoder(pipe, quantized, tiny_taesd_dir):
    from pipelines.approx.taesd import installed_taesd

    try:
        approximate(pipe, taesd=str(tiny_taesd_dir))
        report = approximate(pipe, taesd=str(tiny_taesd_dir), int8=replace(CALIBRATION, steps=2))
        assert report.int8 and not report.int8_vae and pipe.model.vae.int8_decoder_path is None
        assert installed_taesd(pipe.model.vae) is not None
        labels = parse_optimization(pipe(**RUN).infotexts[0])
        assert labels.taesd and labels.int8 and not labels.int8_vae
    finally:
        approximate(pipe, int8=CALIBRATION)


def test_other_calibration_settings_make_another_graph(pipe):
    from mixkit.runtime.openvino_int8 import int8_graph_path

    unet = pipe.model.unet
    settings = {"prompts": ["a cube"], "steps": 3}
    assert int8_graph_path(unet.cache_path, settings) != int8_graph_path(unet.cache_path, {**settings, "steps": 4})
    assert int8_graph_path(unet.cache_path, settings) == int8_graph_path(unet.cache_path, dict(settings))


def test_a_failed_quantization_leaves_the_model_as_it_was(pipe, quantized, monkeypatch):
    unet = pipe.model.unet
    before = (unet.graph, unet.int8_path, model_labels(pipe.model))

    def broken(graph, calibration, *args):
        assert len(calibration) == 2 * 1  # one prompt x two steps, recorded from the float graph
        raise RuntimeError("nncf broke")
    monkeypatch.setattr("mixkit.runtime.openvino_int8.quantize_graph", broken)
    with pytest.raises(RuntimeError, match="nncf broke"):
        approximate(pipe, int8=Int8Calibration(prompts=("a sphere",), width=64, height=64, steps=2))
    assert (unet.graph, unet.int8_path, model_labels(pipe.model)) == before
    assert not list(unet.cache_path.parent.glob("*.tmp.*"))


def test_int8_on_a_unet_it_cannot_quantize_is_refused_before_anything_changes(tiny_sd1_dir):
    import torch

    torch_pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    torch_pipe.model.unet = torch.nn.Identity()
    with pytest.raises(ValueError, match=r"int8 quantizes the OpenVINO UNet graph or a diffusers UNet.*Identity"):
        approximate(torch_pipe, int8=True)
    assert isinstance(torch_pipe.model.unet, torch.nn.Identity) and not model_labels(torch_pipe.model).approximate


@pytest.mark.parametrize("int8, error, message", [
    ("yes", TypeError, "int8 must be True, False or an Int8Calibration"),
    (Int8Calibration(width=65, height=64), ValueError, "int8 calibration: .*multiple of 8"),
    (Int8Calibration(steps=0), ValueError, "int8 calibration: .*steps"),
])
def test_bad_int8_arguments_fail_before_calibrating(pipe, quantized, int8, error, message, monkeypatch):
    monkeypatch.setattr(pipe.model.unet, "recording", lambda: pytest.fail("calibration ran"))
    path = pipe.model.unet.int8_path
    with pytest.raises(error, match=message):
        approximate(pipe, int8=int8)
    assert pipe.model.unet.int8_path == path


@pytest.mark.parametrize("prompts", [(), ("",), "a cube", ("ok", 3)])
def test_calibration_prompts_must_be_non_empty_strings(prompts):
    with pytest.raises(ValueError, match="calibration"):
        Int8Calibration(prompts=prompts)


def test_missing_nncf_names_what_to_install(pipe, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "nncf", None)
    with pytest.raises(ImportError, match=r"needs NNCF: pip install nncf"):
        approximate(pipe, int8=True)


def test_calibration_prompts_come_from_the_model_then_the_generic_set():
    def model(**recommended):
        return SimpleNamespace(recommended=RecommendedSettings(**recommended), native_size=64)

    own = ("a red circle on a blue background", "a green star on a white background")
    params = calibration_params(model(calibration_prompts=own, cfg_scale=5.0, steps=12), Int8Calibration())
    assert [p.prompt for p in params] == list(own)
    assert {(p.width, p.height, p.steps, p.cfg_scale, p.sampler) for p in params} == {(64, 64, 12, 5.0, "DPM++ 2M")}
    assert [p.seed for p in params] == [0, 1]
    generic = calibration_params(model(), Int8Calibration(seed=10, width=128))
    assert [p.prompt for p in generic] == list(DEFAULT_CALIBRATION_PROMPTS) and generic[0].seed == 10
    assert (generic[0].width, generic[0].height, generic[0].steps, generic[0].cfg_scale) == (128, 64, 20, 7.0)
    chosen = calibration_params(model(calibration_prompts=own), Int8Calibration(prompts=["a cube"]))
    assert [p.prompt for p in chosen] == ["a cube"]


def test_shipped_tiny_sd_names_its_calibration_prompts():
    from mixkit.data.shapes_captions import parse_caption
    from mixkit.io.sources import resolve_model_source
    from mixkit.models.diffusion.recommended import read_recommended
    from mixkit.tiny.recipe_sd import TINY_SD_RECOMMENDED

    shipped = read_recommended(resolve_model_source("mixkit-tiny-sd"))
    assert shipped == TINY_SD_RECOMMENDED and len(shipped.calibration_prompts) == 8
    for prompt in shipped.calibration_prompts:
        parse_caption(prompt)  # each one is a sentence of the shapes world
    assert "calibration_prompts" not in shipped.generation_values()


def test_int8_graphs_reshape_to_other_sizes(pipe, quantized):
    image = pipe(**{**RUN, "width": 96, "height": 64}).images[0]
    assert image.size == (96, 64)
    assert isinstance(pipe.model.unet.graph, ov.Model) and pipe.model.vae.int8_decoder_path is not None
    # The decoder calibrated at 64x64 decodes 96x64 latents from the same graph, close to the float decoder.
    import torch

    vae = pipe.model.vae
    graph, path = vae.int8_decoder_graph, vae.int8_decoder_path
    vae.use_float_decoder()
    try:
        with vae.recording() as latents:
            pipe(**{**RUN, "width": 96, "height": 64})
        latents = torch.from_numpy(latents[0][0])
        reference = vae.decode(latents).sample
    finally:
        vae.use_int8_decoder(graph, path)
    int8 = vae.decode(latents).sample
    assert int8.shape == reference.shape == (1, 3, 64, 96)
    assert 0 < float((int8 - reference).abs().mean()) < 0.1 * float(reference.abs().mean())


def test_the_overflow_fix_follows_the_cpus_int8_instructions(monkeypatch):
    from mixkit.runtime import capability, openvino_int8

    for flags, expected in (("fma avx2 avx512f", "enable"), ("avx2 avx512_vnni", "first_layer_only"),
                            ("avx2 avx_vnni", "first_layer_only"), ("", "first_layer_only")):
        monkeypatch.setattr(capability, "cpu_flags", lambda flags=flags: frozenset(flags.split()))
        assert openvino_int8.int8_overflow_fix() == expected
