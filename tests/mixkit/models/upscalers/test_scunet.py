"""SCUNet's network: same-size output for any input, its window attention checked against the official
formulation (einops rearranges, a boolean -inf mask), and the padding to whole windows at the deepest stage."""

from dataclasses import replace

import pytest
import torch
from einops import rearrange

from mixkit.models.upscalers.scunet import SCUNet, SCUNetConfig, WindowSelfAttention
from mixkit.models.upscalers.windows import reflect_pad_to_multiple
from mixkit.testing.tiny_upscalers import TINY_SCUNET, tiny_upscaler


@pytest.mark.parametrize("height, width", [(32, 32), (13, 10), (1, 1), (3, 70)])
def test_any_input_size_comes_out_the_same_size(height, width):
    out = tiny_upscaler(TINY_SCUNET, seed=1)(torch.rand(1, 3, height, width))
    assert out.shape == (1, 3, height, width) and torch.isfinite(out).all()


def test_an_input_is_reflect_padded_to_whole_deepest_windows_and_cropped_back():
    model = tiny_upscaler(TINY_SCUNET, seed=2)
    x = torch.rand(1, 3, 13, 40)
    padded = reflect_pad_to_multiple(x, 32)  # 8 x the 4-pixel window
    assert padded.shape == (1, 3, 32, 64)
    assert torch.equal(model(x), model(padded)[..., :13, :40])


def _official_wmsa(msa: WindowSelfAttention, x: torch.Tensor) -> torch.Tensor:
    """The official WMSA forward, restated: rolls, einops windows, (3 heads, head_dim) channel split, relative
    embedding indexed by (dy, dx) + w - 1 in a (heads, 2w-1, 2w-1) grid, a boolean mask filled with -inf."""
    p, heads = msa.window_size, msa.heads
    if msa.shifted:
        x = torch.roll(x, shifts=(-(p // 2), -(p // 2)), dims=(1, 2))
    x = rearrange(x, "b (w1 p1) (w2 p2) c -> b w1 w2 p1 p2 c", p1=p, p2=p)
    h_windows, w_windows = x.shape[1:3]
    x = rearrange(x, "b w1 w2 p1 p2 c -> b (w1 w2) (p1 p2) c")
    qkv = msa.embedding_layer(x)
    q, k, v = rearrange(qkv, "b nw np (threeh c) -> threeh b nw np c", threeh=3 * heads).chunk(3, dim=0)
    sim = torch.einsum("hbwpc,hbwqc->hbwpq", q, k) * q.shape[-1] ** -0.5
    cord = torch.tensor([[i, j] for i in range(p) for j in range(p)])
    relation = cord[:, None, :] - cord[None, :, :] + p - 1
    sim = sim + msa.relative_position_params[:, relation[:, :, 0], relation[:, :, 1]][:, None, None]
    if msa.shifted:
        s = p - p // 2
        mask = torch.zeros(h_windows, w_windows, p, p, p, p, dtype=torch.bool)
        mask[-1, :, :s, :, s:, :] = True
        mask[-1, :, s:, :, :s, :] = True
        mask[:, -1, :, :s, :, s:] = True
        mask[:, -1, :, s:, :, :s] = True
        sim = sim.masked_fill(rearrange(mask, "w1 w2 p1 p2 p3 p4 -> 1 1 (w1 w2) (p1 p2) (p3 p4)"), float("-inf"))
    out = torch.einsum("hbwij,hbwjc->hbwic", sim.softmax(-1), v)
    out = msa.linear(rearrange(out, "h b w p c -> b w p (h c)"))
    out = rearrange(out, "b (w1 w2) (p1 p2) c -> b (w1 p1) (w2 p2) c", w1=h_windows, p1=p)
    return torch.roll(out, shifts=(p // 2, p // 2), dims=(1, 2)) if msa.shifted else out


@pytest.mark.parametrize("shifted", [False, True], ids=["W", "SW"])
def test_window_attention_matches_the_official_formulation(shifted):
    torch.manual_seed(0)
    msa = WindowSelfAttention(16, 4, 4, shifted)  # 4 heads of 4 channels, 4 x 4 windows
    x = torch.randn(2, 8, 12, 16)
    assert torch.allclose(msa(x), _official_wmsa(msa, x), atol=1e-5)
    # the chunked path (a few windows at a time) gives the same result
    assert torch.allclose(msa(x, chunk_scores=4 * 16 * 16), msa(x), atol=1e-6)


def test_odd_blocks_of_every_stage_shift_their_windows():
    model = SCUNet(replace(TINY_SCUNET, depths=(3, 1, 1, 2, 2, 1, 3)))
    shifted = [[block.trans_block.msa.shifted for block in getattr(model, name) if hasattr(block, "trans_block")]
               for name in ("m_down1", "m_body", "m_up1")]
    assert shifted == [[False, True, False], [False, True], [False, True, False]]


def test_the_released_stage_widths_and_head_counts():
    model = SCUNet(SCUNetConfig())  # scunet_color_real_gan/psnr: dim 64, 4 blocks per stage, heads of 32 channels
    heads = [getattr(model, name)[1 if name.startswith("m_up") else 0].trans_block.msa.heads
             for name in ("m_down1", "m_down2", "m_down3", "m_body", "m_up3", "m_up2", "m_up1")]
    assert heads == [1, 2, 4, 8, 4, 2, 1]
    assert model.m_down3[4].weight.shape == (512, 256, 2, 2) and model.m_up3[0].weight.shape == (512, 256, 2, 2)


@pytest.mark.parametrize("changes, message", [
    (dict(depths=(2,) * 6), "7 block counts"), (dict(dim=15), "dim must be even"),
    (dict(dim=16, head_dim=3), "multiple of head_dim"), (dict(window_size=33), "window_size must be 1 to 32"),
    (dict(depths=(1000, 100, 0, 0, 0, 0, 0)), "at most 1024 blocks"),
])
def test_impossible_configs_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        replace(TINY_SCUNET, **changes)
