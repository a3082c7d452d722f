"""DeepCache on the OpenVINO backend: the UNet graph's feature output and the exported shallow branch against
the eager DeepCache on the same weights, the schedule on a pipeline, with int8, and the refusals."""

import numpy as np
import pytest
import torch
from diffusers import UNet2DConditionModel

pytest.importorskip("openvino", reason="openvino not installed: pip install 'mixkit[openvino]'")

from mixkit.runtime.openvino_unet import OpenVinoUNet  # noqa: E402
from pipelines.approx import approximate, deepcache_state, model_labels, remove_approximations  # noqa: E402
from pipelines.approx.deepcache import (DeepCacheSettings, apply_deepcache, remove_deepcache,  # noqa: E402
                                        shallow_forward)
from pipelines.infotext import parse_optimization  # noqa: E402
from pipelines.optimize import optimize  # noqa: E402
from pipelines.txt2img import TextToImage  # noqa: E402

RUN = dict(prompt="a red cube", negative_prompt="blurry", width=64, height=64, steps=9, seed=7, cfg_scale=7.0)


def inputs(unet, sdxl: bool):
    generator = torch.Generator().manual_seed(1)
    sample = torch.randn(2, 4, 16, 16, generator=generator)
    states = torch.randn(2, 77, unet.config.cross_attention_dim, generator=generator)
    added = None
    if sdxl:  # tiny SDXL: 32-d pooled text embedding + 6 time ids
        added = {"text_embeds": torch.randn(2, 32, generator=generator),
                 "time_ids": torch.tensor([[64.0, 64, 0, 0, 64, 64]] * 2)}
    return sample, torch.tensor(500.0), states, added


@pytest.fixture(scope="module", params=["sd1", "sdxl"])
def converted(request, tiny_sd1_dir, tiny_sdxl_dir, tmp_path_factory):
    sdxl = request.param == "sdxl"
    folder = tiny_sdxl_dir if sdxl else tiny_sd1_dir
    unet = UNet2DConditionModel.from_pretrained(folder, subfolder="unet").eval()
    eager = UNet2DConditionModel.from_pretrained(folder, subfolder="unet").eval()  # the stand-in drops its copy
    standin = OpenVinoUNet(unet, cache_dir=tmp_path_factory.mktemp("ov-deepcache"), inference_precision="f32")
    return eager, standin, inputs(eager, sdxl)


@pytest.mark.parametrize("shallow_layers", [1, 2])
def test_feature_output_and_shallow_graph_match_the_eager_deepcache(converted, shallow_layers):
    eager, standin, (sample, t, states, added) = converted
    state = apply_deepcache(eager, DeepCacheSettings(interval=2, shallow_layers=shallow_layers))
    try:
        with torch.no_grad():
            expected = eager(sample, t, states, added_cond_kwargs=added).sample  # full call: caches the feature
            expected_shallow = shallow_forward(eager, state.feature, shallow_layers, sample, t + 1, states,
                                               added_cond_kwargs=added).sample
        branch = standin.deepcache_branch(shallow_layers)
        output, feature = branch.full(sample, t, states, added)
        torch.testing.assert_close(output.sample, expected, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(feature, state.feature, rtol=1e-4, atol=1e-4)
        # on the feature of the same inputs the shallow branch gives the full output back
        torch.testing.assert_close(branch.shallow(feature, sample, t, states, added).sample, expected,
                                   rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(branch.shallow(state.feature, sample, t + 1, states, added).sample,
                                   expected_shallow, rtol=1e-4, atol=1e-4)
        assert branch.cache_path.exists() and branch.cache_path.name.startswith("unet-shallow-")
        # the plain call still returns the UNet's output alone, from a compiled graph without the feature outputs
        torch.testing.assert_close(standin(sample, t, states, added_cond_kwargs=added).sample, expected,
                                   rtol=1e-4, atol=1e-4)
        assert sorted(len(c.outputs) for c, _ in standin._compiled.values()) == [1, 1 + standin.deepcache_layers]
    finally:
        remove_deepcache(eager)


def test_shallow_graph_is_cached_on_disk_and_reused(converted):
    eager, standin, _ = converted
    first = standin.deepcache_branch(1)
    assert standin.deepcache_branch(1) is first  # one export per stand-in and depth
    again = OpenVinoUNet(eager, cache_dir=standin.cache_path.parent, inference_precision="f32")  # same weights
    assert again.cache_hit and again.deepcache_branch(1).cache_hit


def test_too_many_shallow_layers_are_refused(converted):
    _, standin, _ = converted
    layers = standin.deepcache_layers
    assert layers == len(converted[0].up_blocks[-1].resnets)
    with pytest.raises(ValueError, match=f"exceeds the {layers} layers"):
        standin.deepcache_branch(layers + 1)


@pytest.fixture(scope="module")
def pipes(tiny_sd1_dir, tmp_path_factory):
    eager = TextToImage.from_pretrained(tiny_sd1_dir)
    graph = TextToImage.from_pretrained(tiny_sd1_dir)
    optimize(graph, "exact", "openvino", cache_dir=tmp_path_factory.mktemp("ov-pipe"))
    return eager, graph


def test_pipeline_on_openvino_follows_the_eager_schedule_and_image(pipes):
    eager, graph = pipes
    plain = np.asarray(graph(**RUN).images[0]).astype(float)
    approximate(eager, deepcache=3)
    report = approximate(graph, deepcache=3)
    try:
        expected = np.asarray(eager(**RUN).images[0]).astype(float)
        result = graph(**RUN)
        got = np.asarray(result.images[0]).astype(float)
        assert np.abs(got - expected).max() <= 2  # float32 graphs against eager float32
        assert np.abs(got - plain).mean() > 0.5  # and DeepCache did change the image
        state, eager_state = deepcache_state(graph.model.unet), deepcache_state(eager.model.unet)
        assert (state.full_calls, state.cached_calls) == (eager_state.full_calls, eager_state.cached_calls) == (3, 6)
        assert "DeepCache: 3" in result.infotexts[0] and report.deepcache == 3
    finally:
        remove_approximations(eager)
        remove_approximations(graph)
    assert "forward" not in graph.model.unet.__dict__ and deepcache_state(graph.model.unet) is None
    np.testing.assert_array_equal(np.asarray(graph(**RUN).images[0]).astype(float), plain)


def test_int8_with_deepcache_runs_the_int8_graph_on_full_calls(pipes, monkeypatch):
    pytest.importorskip("nncf", reason="nncf not installed: pip install 'mixkit[openvino]'")
    from pipelines.approx import Int8Calibration

    _, graph = pipes
    calibration = Int8Calibration(prompts=("a cube",), width=64, height=64, steps=3, cfg_scale=7.0)
    report = approximate(graph, int8=calibration, deepcache=2)
    try:
        unet = graph.model.unet
        assert unet.int8_path is not None and report.int8 and report.deepcache == 2
        assert len(unet.graph.outputs) == 1 + unet.deepcache_layers  # the int8 graph kept the feature outputs
        result = graph(**RUN)
        state = deepcache_state(unet)
        assert (state.full_calls, state.cached_calls) == (5, 4)
        labels = parse_optimization(result.infotexts[0])
        assert labels.int8 and "DeepCache: 2" in result.infotexts[0]
    finally:
        remove_approximations(graph)
    assert graph.model.unet.int8_path is None


def test_a_failed_shallow_export_changes_nothing(tiny_sd1_dir, tmp_path, monkeypatch):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    optimize(pipe, "exact", "openvino", cache_dir=tmp_path)
    labels = model_labels(pipe.model)

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")
    monkeypatch.setattr("mixkit.runtime.openvino_unet.load_or_export", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        approximate(pipe, deepcache=2)
    assert "forward" not in pipe.model.unet.__dict__ and deepcache_state(pipe.model.unet) is None
    assert model_labels(pipe.model) == labels and not list(tmp_path.glob("unet-shallow-*"))
