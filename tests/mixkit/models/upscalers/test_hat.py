"""HAT's network: output sizes for any input, its overlapping cross-attention and hybrid attention blocks checked
against the official formulation (unfold, einops rearrange, the original's position index with its negative entries
indexing from the table's end)."""

from dataclasses import replace

import pytest
import torch
from einops import rearrange

from mixkit.models.upscalers.hat import HAT, HATConfig, HybridAttentionBlock, OverlappingCrossAttention, overlap_position_index
from mixkit.models.upscalers.windows import merge, partition, shift_mask
from mixkit.testing.tiny_upscalers import TINY_HAT, tiny_upscaler


@pytest.mark.parametrize("changes", [dict(), dict(upscale=3), dict(upscale=4, resi_connection="identity"),
                                     dict(window_size=2, overlap_window_size=4, patch_norm=False)],
                         ids=["x2", "x3", "x4-identity", "w2-no-patch-norm"])
@pytest.mark.parametrize("height, width", [(8, 8), (7, 10), (1, 3)])
def test_any_input_size_scales(changes, height, width):
    config = replace(TINY_HAT, **changes)
    out = tiny_upscaler(config, seed=1)(torch.rand(1, 3, height, width))
    assert out.shape == (1, 3, height * config.upscale, width * config.upscale) and torch.isfinite(out).all()


def _official_rpi_oca(window: int, overlap: int) -> torch.Tensor:
    """calculate_rpi_oca as the original writes it: negative entries left in."""
    def coords(side):
        return torch.stack(torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")).flatten(1)

    relative = (coords(overlap)[:, None, :] - coords(window)[:, :, None]).permute(1, 2, 0).contiguous()
    relative += window - overlap + 1
    relative[:, :, 0] *= window + overlap - 1
    return relative.sum(-1)


def test_the_overlap_position_index_reads_the_rows_the_originals_negative_entries_read():
    raw = _official_rpi_oca(16, 24)  # the released HAT windows
    assert raw.min() < 0  # the quirk: offsets below zero, wrapped by indexing
    table = torch.randn(39 * 39, 2)
    assert torch.equal(table[overlap_position_index(16, 24)], table[raw])
    assert overlap_position_index(16, 24).min() >= 0 and overlap_position_index(16, 24).shape == (256, 576)


def _window_partition(x, ws):  # the original's window_partition / window_reverse
    b, h, w, c = x.shape
    return x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws, ws, c)


def _window_reverse(windows, ws, h, w):
    b = int(windows.shape[0] / (h * w / ws / ws))
    return windows.view(b, h // ws, w // ws, ws, ws, -1).permute(0, 1, 3, 2, 4, 5).contiguous().view(b, h, w, -1)


def _official_ocab(block: OverlappingCrossAttention, x: torch.Tensor) -> torch.Tensor:
    b, h, w, c = x.shape
    ws, ow, heads = block.window_size, block.overlap_window_size, block.num_heads
    shortcut = x
    qkv = block.qkv(block.norm1(x)).reshape(b, h, w, 3, c).permute(3, 0, 4, 1, 2)
    q = qkv[0].permute(0, 2, 3, 1)
    kv = torch.cat((qkv[1], qkv[2]), dim=1)
    q_windows = _window_partition(q, ws).view(-1, ws * ws, c)
    kv_windows = torch.nn.functional.unfold(kv, (ow, ow), stride=ws, padding=(ow - ws) // 2)
    kv_windows = rearrange(kv_windows, "b (nc ch owh oww) nw -> nc (b nw) (owh oww) ch", nc=2, ch=c, owh=ow, oww=ow)
    k_windows, v_windows = kv_windows[0], kv_windows[1]
    d = c // heads
    q = q_windows.reshape(-1, ws * ws, heads, d).permute(0, 2, 1, 3) * d ** -0.5
    k = k_windows.reshape(-1, ow * ow, heads, d).permute(0, 2, 1, 3)
    v = v_windows.reshape(-1, ow * ow, heads, d).permute(0, 2, 1, 3)
    bias = block.relative_position_bias_table[_official_rpi_oca(ws, ow).view(-1)].view(ws * ws, ow * ow, -1)
    attn = (q @ k.transpose(-2, -1) + bias.permute(2, 0, 1)[None]).softmax(-1)
    out = (attn @ v).transpose(1, 2).reshape(-1, ws * ws, c)
    x = block.proj(_window_reverse(out.view(-1, ws, ws, c), ws, h, w)) + shortcut
    return x + block.mlp(block.norm2(x))


def test_overlapping_cross_attention_matches_the_official_formulation():
    torch.manual_seed(0)
    block = OverlappingCrossAttention(replace(TINY_HAT, embed_dim=8), num_heads=2)
    x = torch.randn(2, 8, 12, 8)
    assert torch.allclose(block(x), _official_ocab(block, x), atol=1e-5)
    assert torch.allclose(block(x, chunk_scores=1), block(x), atol=1e-6)  # one window at a time


@pytest.mark.parametrize("shifted", [False, True])
def test_a_hybrid_block_adds_the_channel_attention_branch_scaled_by_conv_scale(shifted):
    torch.manual_seed(0)
    config = replace(TINY_HAT, conv_scale=0.5)
    block = HybridAttentionBlock(config, 2, shifted)
    x = torch.randn(1, 8, 8, 8)
    mask = shift_mask(8, 8, 4, 4, 2, 2)
    y = block.norm1(x)
    conv = block.conv_block.cab(y.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
    rolled = torch.roll(y, (-2, -2), (1, 2)) if shifted else y
    attended = merge(block.attn(partition(rolled, 4, 4), mask if shifted else None), 4, 4, 8, 8)
    attended = torch.roll(attended, (2, 2), (1, 2)) if shifted else attended
    expected = x + attended + 0.5 * conv
    expected = expected + block.mlp(block.norm2(expected))
    assert torch.allclose(block(x, mask), expected, atol=1e-6)
    gate = block.conv_block.cab[3]
    inner = block.conv_block.cab[2](block.conv_block.cab[1](block.conv_block.cab[0](y.permute(0, 3, 1, 2))))
    assert torch.allclose(conv.permute(0, 3, 1, 2), inner * gate.attention(inner), atol=1e-6)


@pytest.mark.parametrize("changes, message", [
    (dict(upsampler=""), "upsampler must be 'pixelshuffle'"), (dict(upscale=5), "x2\\^n or x3"),
    (dict(overlap_window_size=7), "by an even number"), (dict(resi_connection="3conv"), "resi_connection must be"),
    (dict(num_heads=(3, 1)), "not divisible"), (dict(num_heads=(2,)), "one head count per layer"),
    (dict(window_size=33), "window_size must be 2 to 32"), (dict(depths=(1024, 1)), "at most 1024 blocks"),
    (dict(overlap_window_size=66), "overlap_window_size may be at most 64"),
])
def test_impossible_configs_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        HAT(replace(TINY_HAT, **changes))


def test_the_released_hat_sizes_build():
    # HAT-L SRx4 (and 4xNomos8kHAT-L): 12 groups of 6 blocks, 180 features, 16-pixel windows, 24-pixel key windows
    with torch.device("meta"):
        model = HAT(HATConfig(depths=(6,) * 12, num_heads=(6,) * 12))
    table = model.layers[0].residual_group.overlap_attn.relative_position_bias_table
    assert table.shape == (39 * 39, 6) and model.config.overlap_ratio == 0.5
