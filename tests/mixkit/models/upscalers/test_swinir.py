"""SwinIR's network: output sizes of every reconstruction head, window padding, and the window attention's bias
checked against its definition in the paper (per token pair, by explicit loops)."""

import pytest
import torch

from mixkit.models.upscalers.swinir import SwinIR, SwinIRConfig, WindowAttention, mirror_pad, window_padding
from mixkit.models.upscalers.windows import shift_mask
from mixkit.testing.tiny_upscalers import TINY_SWINIR, tiny_upscaler

VARIANTS = [
    dict(upsampler="pixelshuffle", upscale=2), dict(upsampler="pixelshuffle", upscale=3),
    dict(upsampler="pixelshuffle", upscale=4, resi_connection="3conv"), dict(upsampler="pixelshuffle", upscale=8),
    dict(upsampler="pixelshuffledirect", upscale=2), dict(upsampler="pixelshuffledirect", upscale=3),
    dict(upsampler="nearest+conv", upscale=4), dict(upsampler="nearest+conv", upscale=2, resi_connection="3conv"),
    dict(upsampler="", upscale=1),
]


def tiny_config(**changes) -> SwinIRConfig:
    from dataclasses import replace

    return replace(TINY_SWINIR, **changes)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: f"{v['upsampler'] or 'none'}-x{v['upscale']}")
@pytest.mark.parametrize("height, width", [(8, 12), (7, 10), (3, 5)])
def test_every_head_scales_any_input_size(variant, height, width):
    model = tiny_upscaler(tiny_config(**variant), seed=1)
    out = model(torch.rand(1, 3, height, width))
    assert out.shape == (1, 3, height * variant["upscale"], width * variant["upscale"])
    assert torch.isfinite(out).all()


def test_a_padded_input_gives_the_output_of_its_mirrored_whole_window_input_cropped():
    model = tiny_upscaler(TINY_SWINIR, seed=2)
    x = torch.rand(1, 3, 6, 7)
    # the window is 4: 6x7 is run as 8x8, extended by its mirror image (edge pixel repeated)
    padded = torch.cat([x, x.flip(2)[:, :, :2]], 2)
    padded = torch.cat([padded, padded.flip(3)[:, :, :, :1]], 3)
    assert torch.equal(mirror_pad(x, 2, 1), padded)
    assert torch.equal(model(x), model.forward_whole_windows(padded)[..., :12, :14])


def test_padding_follows_the_official_test_script_a_full_window_more_on_whole_windows():
    assert [window_padding(side, 8) for side in (1, 7, 8, 9, 16, 63, 64)] == [7, 1, 8, 7, 8, 1, 8]
    model = tiny_upscaler(TINY_SWINIR, seed=2)
    x = torch.rand(1, 3, 8, 4)
    assert torch.equal(model(x), model.forward_whole_windows(mirror_pad(x, 4, 4))[..., :16, :8])


def test_mirror_pad_of_an_image_smaller_than_its_pad_repeats_the_mirror():
    x = torch.arange(3.0).view(1, 1, 1, 3)
    assert mirror_pad(x, 0, 7)[0, 0, 0].tolist() == [0, 1, 2, 2, 1, 0, 0, 1, 2, 2]


def test_window_attention_adds_the_relative_position_bias_of_each_token_pair():
    torch.manual_seed(0)
    size, heads, dim = 3, 2, 4
    attn = WindowAttention(dim, size, heads, qkv_bias=True)
    windows = torch.randn(1, 2, size * size, dim)
    q, k, v = attn.qkv(windows).view(1, 2, size * size, 3, heads, dim // heads).permute(3, 0, 1, 4, 2, 5)
    expected = torch.empty(1, 2, heads, size * size, dim // heads)
    for w in range(2):
        for h in range(heads):
            scores = q[0, w, h] @ k[0, w, h].T / (dim // heads) ** 0.5
            for i in range(size * size):
                for j in range(size * size):
                    dy, dx = i // size - j // size, i % size - j % size  # offset of token i from token j
                    scores[i, j] += attn.relative_position_bias_table[(dy + size - 1) * (2 * size - 1) + dx + size - 1, h]
            expected[0, w, h] = scores.softmax(-1) @ v[0, w, h]
    expected = attn.proj(expected.transpose(2, 3).reshape(1, 2, size * size, dim))
    assert torch.allclose(attn(windows, None), expected, atol=1e-5)


def test_shifted_blocks_use_the_mask_and_unshifted_ones_do_not():
    model = tiny_upscaler(TINY_SWINIR, seed=3)
    blocks = model.layers[0].residual_group.blocks
    assert (blocks[0].shift, blocks[1].shift) == (0, 2)
    x = torch.randn(1, 8, 8, 8)
    no_mask = torch.zeros(4, 16, 16)
    assert torch.equal(blocks[0](x, shift_mask(8, 8, 4, 4, 2, 2)), blocks[0](x, no_mask))
    assert not torch.allclose(blocks[1](x, shift_mask(8, 8, 4, 4, 2, 2)), blocks[1](x, no_mask))


def test_the_same_size_head_adds_its_output_to_the_input():
    model = tiny_upscaler(tiny_config(upsampler="", upscale=1), seed=4)
    torch.nn.init.zeros_(model.conv_last.weight), torch.nn.init.zeros_(model.conv_last.bias)
    x = torch.rand(1, 3, 5, 6)
    assert torch.allclose(model(x), x, atol=1e-6)


@pytest.mark.parametrize("changes, message", [
    (dict(upsampler="bicubic"), "upsampler must be one of"), (dict(resi_connection="2conv"), "resi_connection"),
    (dict(upsampler="nearest+conv", upscale=3), "cannot upscale x3"), (dict(upsampler="", upscale=2), "cannot upscale x2"),
    (dict(num_heads=(2,)), "one head count per layer"), (dict(num_heads=(3, 1)), "not divisible"),
])
def test_impossible_configs_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        SwinIR(tiny_config(**changes))
