"""DAT's network: output sizes, the staggered shift pattern, the dynamic position bias, and the channel attention
checked against its definition."""

from dataclasses import replace

import pytest
import torch

from mixkit.models.upscalers.dat import DAT, ChannelAttention, DATConfig, WindowBranch, shifted_block
from mixkit.models.upscalers.windows import relative_position_index
from mixkit.testing.tiny_upscalers import TINY_DAT, tiny_upscaler


@pytest.mark.parametrize("changes", [dict(), dict(upscale=3), dict(upscale=4, resi_connection="3conv"),
                                     dict(upsampler="pixelshuffledirect", upscale=4, split_size=(4, 2))],
                         ids=["x2", "x3", "x4-3conv", "direct-x4"])
@pytest.mark.parametrize("height, width", [(8, 8), (7, 10), (3, 5)])
def test_any_input_size_scales(changes, height, width):
    config = replace(TINY_DAT, **changes)
    out = tiny_upscaler(config, seed=1)(torch.rand(1, 3, height, width))
    assert out.shape == (1, 3, height * config.upscale, width * config.upscale) and torch.isfinite(out).all()


def test_spatial_blocks_shift_in_dats_staggered_pattern():
    # even groups shift their spatial blocks 2, 6, 10 ...; odd groups 0, 4, 8 ...; odd blocks are channel blocks
    assert [b for b in range(12) if b % 2 == 0 and shifted_block(0, b)] == [2, 6, 10]
    assert [b for b in range(12) if b % 2 == 0 and shifted_block(1, b)] == [0, 4, 8]
    model = DAT(replace(TINY_DAT, depths=(5, 5), num_heads=(2, 2)))
    kinds = [[getattr(block.attn, "shifted", "channel") for block in group.blocks] for group in model.layers]
    assert kinds == [[False, "channel", True, "channel", False], [True, "channel", False, "channel", True]]


def test_the_position_bias_of_a_token_pair_is_the_mlp_of_their_offset():
    torch.manual_seed(0)
    branch = WindowBranch(64, 2, 2, 3)  # 2 x 3 windows
    table = branch.pos(branch.rpe_biases)
    assert branch.rpe_biases.shape == (3 * 5, 2)
    index = relative_position_index(2, 3)
    for i in range(6):
        for j in range(6):
            offset = torch.tensor([[i // 3 - j // 3, i % 3 - j % 3]], dtype=torch.float32)
            assert torch.allclose(table[index[i, j]], branch.pos(offset)[0])


def test_channel_attention_attends_across_each_heads_channels_with_its_temperature():
    torch.manual_seed(0)
    attn = ChannelAttention(32, 2, qkv_bias=True).eval()
    torch.nn.init.normal_(attn.temperature)
    x, h, w = torch.randn(1, 12, 32), 3, 4
    q, k, v = attn.qkv(x).view(1, 12, 3, 32).unbind(2)
    outputs = []
    for head in range(2):  # channels 16 * head ... of every token
        qh, kh, vh = (t[0, :, 16 * head:16 * (head + 1)].T for t in (q, k, v))  # (16 channels, 12 tokens)
        scores = torch.nn.functional.normalize(qh, dim=-1) @ torch.nn.functional.normalize(kh, dim=-1).T
        outputs.append(((scores * attn.temperature[head]).softmax(-1) @ vh).T)
    attended = torch.cat(outputs, 1)[None]
    conv = attn.dwconv(v.transpose(1, 2).reshape(1, 32, h, w))
    spatial = torch.sigmoid(attn.spatial_interaction(conv)).flatten(2).transpose(1, 2)
    channel = torch.sigmoid(attn.channel_interaction(attended.transpose(1, 2).reshape(1, 32, h, w)))
    expected = attn.proj(attended * spatial + (conv * channel).flatten(2).transpose(1, 2))
    assert torch.allclose(attn(x, h, w), expected, atol=1e-5)


@pytest.mark.parametrize("changes, message", [
    (dict(upsampler="nearest+conv"), "upsampler must be"), (dict(embed_dim=30), "at least 32"), (dict(embed_dim=33), "even and"),
    (dict(num_heads=(3, 4)), "even head count"), (dict(split_size=(2, 3)), "divide one another"),
    (dict(upscale=5), "cannot upscale x5"), (dict(num_heads=(2,)), "one head count per group"),
])
def test_impossible_configs_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        DAT(replace(TINY_DAT, **changes))


def test_more_blocks_than_any_released_dat_are_refused():
    with pytest.raises(ValueError, match=r"DAT may have at most 1024 blocks in all, got 1025 \(depths \(1024, 1\)\)"):
        DATConfig(depths=(1024, 1), num_heads=(6, 6))
