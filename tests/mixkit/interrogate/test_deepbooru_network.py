"""DeepDanbooru's resnet_custom_v3 as A1111's port stores it: its 179 keys, shapes and strides at full size (built
on the meta device), Keras "same" padding checked against the formula, and exact scores through a crafted file."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from mixkit.interrogate.deepbooru_network import CONV_COUNT, DeepDanbooruNetwork, DeepDanbooruSizes
from mixkit.testing.tiny_deepbooru import crafted_deepbooru_state, random_deepbooru_state, tiny_deepbooru_sizes


@pytest.fixture(scope="module")
def full_size():
    with torch.device("meta"):
        return DeepDanbooruNetwork()


def test_full_size_keys_are_the_ports_in_its_order(full_size):
    expected = [f"n_Conv_{i}.{part}" for i in range(178) for part in ("weight", "bias")] + ["n_Conv_178.weight"]
    assert CONV_COUNT == 179
    assert list(full_size.state_dict()) == expected


@pytest.mark.parametrize("index, shape", [
    (0, (64, 3, 7, 7)), (1, (256, 64, 1, 1)), (2, (64, 64, 1, 1)), (3, (64, 64, 3, 3)), (4, (256, 64, 1, 1)),
    (11, (512, 256, 1, 1)), (12, (128, 256, 1, 1)), (13, (128, 128, 3, 3)), (36, (1024, 512, 1, 1)),
    (37, (256, 512, 1, 1)), (97, (256, 1024, 1, 1)), (98, (256, 256, 3, 3)), (99, (1024, 256, 1, 1)),
    (100, (1024, 1024, 1, 1)), (101, (256, 1024, 1, 1)), (158, (2048, 1024, 1, 1)), (160, (512, 512, 3, 3)),
    (168, (4096, 2048, 1, 1)), (169, (1024, 2048, 1, 1)), (177, (4096, 1024, 1, 1)), (178, (9176, 4096, 1, 1)),
])
def test_full_size_shapes_match_a1111s_port(full_size, index, shape):
    assert tuple(full_size.state_dict()[f"n_Conv_{index}.weight"].shape) == shape


def test_strides_and_the_bias_free_classifier_match_the_port(full_size):
    convs = {name: module for name, module in full_size.named_modules() if name.startswith("n_Conv_")}
    strided = sorted(int(name[7:]) for name, conv in convs.items() if conv.stride == (2, 2))
    assert strided == [0, 11, 13, 36, 38, 98, 100, 158, 160, 168, 170]
    assert [name for name, conv in convs.items() if conv.bias is None] == ["n_Conv_178"]
    assert sum(value.numel() for value in full_size.state_dict().values()) == 160_956_544


def test_sizes_are_checked():
    with pytest.raises(ValueError, match="6 stages; got 2 widths"):
        DeepDanbooruSizes(widths=(8, 8))
    with pytest.raises(ValueError, match="whole numbers >= 1, got 0"):
        DeepDanbooruSizes(num_tags=0)


def _same_pad(x, kernel, stride, value=0.0):
    """Keras/TensorFlow "same" padding from its definition: total = max((ceil(n/s)-1)*s + k - n, 0), the smaller
    half before."""
    pads = []
    for size in (x.shape[-1], x.shape[-2]):
        total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
        pads += [total // 2, total - total // 2]
    return F.pad(x, pads, value=value)


def _keras_forward(network, pixels):
    conv = {name: module for name, module in network.named_modules() if name.startswith("n_Conv_")}
    x = F.relu(conv["n_Conv_0"](_same_pad(pixels, 7, 2)))
    x = F.max_pool2d(_same_pad(x, 3, 2, float("-inf")), 3, 2)
    for block in network._blocks:
        skip = x if block.shortcut is None else block.shortcut(x)
        h = F.relu(block.reduce(x))
        h = F.relu(block.spatial(_same_pad(h, 3, block.stride)))
        x = F.relu(block.expand(h) + skip)
    return torch.sigmoid(conv[f"n_Conv_{CONV_COUNT - 1}"](x).mean(dim=(2, 3)))


def test_forward_is_keras_same_padding_on_a_512_image():
    network = DeepDanbooruNetwork(tiny_deepbooru_sizes(5))
    network.load_state_dict(random_deepbooru_state(5, seed=3))
    pixels = torch.rand(1, 3, 512, 512, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        scores = network(pixels)
        assert scores.shape == (1, 5)
        torch.testing.assert_close(scores, _keras_forward(network, pixels), rtol=0, atol=1e-6)


def test_crafted_state_scores_each_tag_its_logits_sigmoid():
    logits = [2.0, -1.0, 0.0, 4.5]
    network = DeepDanbooruNetwork(tiny_deepbooru_sizes(4))
    network.load_state_dict(crafted_deepbooru_state(logits))
    with torch.no_grad():
        scores = network(torch.rand(1, 3, 512, 512, generator=torch.Generator().manual_seed(1)))
    assert torch.equal(scores[0], torch.sigmoid(torch.tensor(logits)))
