"""The OpenVINO UNet against the torch UNet it was converted from (one conversion, ~20 s on 2 cores)."""

import pytest
import torch

openvino = pytest.importorskip("openvino", reason="openvino not installed: pip install 'mixkit[openvino]'")

from mixkit.runtime.openvino_unet import OpenVinoUNet, weights_fingerprint  # noqa: E402


@pytest.fixture(scope="module")
def converted(tiny_sd1_dir, tmp_path_factory):
    from diffusers import UNet2DConditionModel

    unet = UNet2DConditionModel.from_pretrained(tiny_sd1_dir, subfolder="unet").eval()
    cache = tmp_path_factory.mktemp("ov-cache")
    return unet, OpenVinoUNet(unet, cache_dir=cache, inference_precision="f32"), cache


def test_openvino_unet_matches_torch(converted, unet_inputs):
    unet, ov_unet, _ = converted
    sample, t, context = unet_inputs
    with torch.no_grad():
        expected = unet(sample, t, context).sample
    got = ov_unet(sample, t, encoder_hidden_states=context).sample
    assert not ov_unet.cache_hit
    assert got.dtype == torch.float32 and got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    # a batch size never seen before compiles a second static-shape graph from the same conversion
    got_one = ov_unet(sample[:1], t, encoder_hidden_states=context[:1]).sample
    torch.testing.assert_close(got_one, expected[:1], rtol=1e-4, atol=1e-4)


def test_second_load_reuses_the_cached_graph(converted, unet_inputs):
    unet, first, cache = converted
    second = OpenVinoUNet(unet, cache_dir=cache)
    assert second.cache_hit and second.cache_path == first.cache_path
    sample, t, context = unet_inputs
    torch.testing.assert_close(second(sample, t, context).sample, first(sample, t, context).sample)


def test_the_same_weights_from_another_folder_reuse_the_cached_graph(converted, tiny_sd1_dir, tmp_path):
    """The cache key ignores where the model was loaded from (`_name_or_path`); the weights decide."""
    import shutil

    from diffusers import UNet2DConditionModel

    _, first, cache = converted
    copy = shutil.copytree(tiny_sd1_dir / "unet", tmp_path / "elsewhere" / "unet")
    moved = UNet2DConditionModel.from_pretrained(copy.parent, subfolder="unet").eval()
    assert moved.config._name_or_path != first.config._name_or_path
    assert OpenVinoUNet(moved, cache_dir=cache).cache_path == first.cache_path


def test_changed_weights_change_the_cache_key(converted):
    """A merged LoRA changes the weights, so it must not reuse the graph of the plain model."""
    unet, first, _ = converted
    before = weights_fingerprint(unet)
    with torch.no_grad():
        unet.conv_in.weight[0, 0, 0, 0] += 1e-3
        after = weights_fingerprint(unet)
        unet.conv_in.weight[0, 0, 0, 0] -= 1e-3
    assert before != after


def test_unsupported_keywords_are_refused(converted, unet_inputs):
    _, ov_unet, _ = converted
    sample, t, context = unet_inputs
    with pytest.raises(ValueError, match="down_block_additional_residuals.*backend='torch'"):
        ov_unet(sample, t, context, down_block_additional_residuals=[torch.zeros(1)])


def test_bf16_graph_file_holds_float16_weights(converted, tmp_path):
    """For bf16 inference the saved graph is float16 (half the pages to map while compiling), its own entry."""
    unet, f32_graph, _ = converted
    bf16_graph = OpenVinoUNet(unet, cache_dir=tmp_path, inference_precision="bf16")
    assert bf16_graph.weights_file_precision == "f16" and f32_graph.weights_file_precision == "f32"
    assert bf16_graph.cache_key != f32_graph.cache_key
    half, full = (g.cache_path.with_suffix(".bin").stat().st_size for g in (bf16_graph, f32_graph))
    assert half < 0.6 * full


def test_an_even_batch_runs_as_two_requests_on_two_streams(converted, unet_inputs, monkeypatch):
    """CFG's two rows as two one-row requests in parallel: the same result as one two-row request."""
    import mixkit.runtime.openvino_unet as module

    unet, ov_unet, _ = converted
    sample, t, context = unet_inputs
    monkeypatch.setattr(module, "usable_cores", lambda: 2)
    with torch.no_grad():
        expected = unet(sample, t, context).sample
    split = ov_unet(sample, t, context).sample
    monkeypatch.setattr(ov_unet, "parallel_requests", 1)
    whole = ov_unet(sample, t, context).sample
    torch.testing.assert_close(split, expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(split, whole, rtol=1e-5, atol=1e-5)
    streamed = [(key, compiled) for key, (compiled, requests) in ov_unet._compiled.items() if len(requests) == 2]
    assert streamed, "the two-row call did not run as two requests"
    key, compiled = streamed[0]
    assert key[0][0][0] == 1  # compiled for one row per request
    assert int(compiled.get_property("NUM_STREAMS")) == 2


def test_odd_batches_and_single_cores_run_one_request(converted, unet_inputs, monkeypatch):
    import mixkit.runtime.openvino_unet as module

    _, ov_unet, _ = converted
    monkeypatch.setattr(module, "usable_cores", lambda: 2)
    assert ov_unet._request_count(2) == 2 and ov_unet._request_count(4) == 2
    assert ov_unet._request_count(1) == 1 and ov_unet._request_count(3) == 1
    monkeypatch.setattr(module, "usable_cores", lambda: 1)
    assert ov_unet._request_count(2) == 1
    sample, t, context = unet_inputs
    assert ov_unet(sample[:1], t, context[:1]).sample.shape == sample[:1].shape


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None])
def test_parallel_requests_must_be_a_positive_integer(converted, bad):
    _, ov_unet, _ = converted
    with pytest.raises(ValueError, match="parallel_requests must be a positive integer"):
        ov_unet.parallel_requests = bad
    assert ov_unet.parallel_requests == 2  # unchanged by the refused value
