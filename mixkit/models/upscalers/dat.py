"""DAT (Chen et al. 2023, "Dual Aggregation Transformer for Image Super-Resolution"): residual groups whose blocks
alternate spatial window attention and channel attention, each paired with a depth-wise convolution branch that
the two exchange sigmoid gates with, and a spatially gated feed-forward network.

The module and parameter names are the official `dat_arch.py`'s (`before_RG.1`, `layers.N.blocks.M.attn.attns.K
.pos.pos3.2`, `attn.dwconv.1` (BatchNorm), `ffn.sg.conv` ...), so released files (DAT, DAT-S, DAT-2, DAT-light and
the community's 4x DAT models) load key for key. Spatial attention splits the channels in two halves that attend
in split_size[0] x split_size[1] and split_size[1] x split_size[0] windows; its buffers (relative offsets, shift masks)
are computed here for each input size, and `dat_layout` reads the window size from the copies in the file.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from mixkit.models.upscalers.transformer_frame import TransformerUpscaler, conv_block
from mixkit.models.upscalers.windows import (MAX_BLOCKS, MAX_WINDOW_TOKENS, attend, merge, partition,
                                             relative_position_index, shift_mask)


@dataclass(frozen=True)
class DATConfig:
    in_channels: int = 3
    out_channels: int = 3
    embed_dim: int = 180
    depths: tuple[int, ...] = (6, 6, 6, 6, 6, 6)
    num_heads: tuple[int, ...] = (6, 6, 6, 6, 6, 6)
    split_size: tuple[int, int] = (8, 32)
    expansion_factor: float = 4.0
    qkv_bias: bool = True
    upsampler: str = "pixelshuffle"  # or "pixelshuffledirect" (DAT-light)
    upscale: int = 4
    resi_connection: str = "1conv"
    num_feat: int = 64
    img_range: float = 1.0  # not stored in files; every released model uses 1.0

    @property
    def scale(self) -> int:
        return self.upscale

    def __post_init__(self) -> None:
        if self.upsampler not in ("pixelshuffle", "pixelshuffledirect"):
            raise ValueError(f"DAT upsampler must be 'pixelshuffle' or 'pixelshuffledirect', got {self.upsampler!r}.")
        if self.resi_connection not in ("1conv", "3conv"):
            raise ValueError(f"DAT resi_connection must be '1conv' or '3conv', got {self.resi_connection!r}.")
        if len(self.depths) != len(self.num_heads) or not self.depths:
            raise ValueError(f"DAT needs one head count per group: depths {self.depths}, num_heads {self.num_heads}.")
        # each spatial branch takes half the channels and half the heads; the gates and the position MLP take
        # dim / 16 and dim / 32 channels, so 32 is the least width that gives every layer a channel
        if self.embed_dim < 32 or self.embed_dim % 2 or any(
                heads < 2 or heads % 2 or self.embed_dim % heads for heads in self.num_heads):
            raise ValueError(f"DAT's embed_dim must be even and at least 32, split evenly by even head counts, got "
                             f"{self.embed_dim} with {self.num_heads}.")
        if sum(self.depths) > MAX_BLOCKS:
            raise ValueError(f"DAT may have at most {MAX_BLOCKS} blocks in all, got {sum(self.depths)} (depths "
                             f"{self.depths[:8]}{' ...' if len(self.depths) > 8 else ''}).")
        hidden = int(self.embed_dim * self.expansion_factor)
        if hidden < 2 or hidden % 2:
            raise ValueError(f"DAT's feed-forward width embed_dim x expansion_factor must be even and at least 2 (its "
                             f"gate takes half), got {self.embed_dim} x {self.expansion_factor}.")
        small, large = sorted(self.split_size)
        if small < 1 or large % small:
            raise ValueError(f"DAT's split_size sides must divide one another (inputs are padded to the larger), got "
                             f"{self.split_size}.")
        if small * large > MAX_WINDOW_TOKENS:
            raise ValueError(f"DAT's split_size windows may hold at most {MAX_WINDOW_TOKENS} tokens (released models use "
                             f"8 x 32), got {self.split_size}.")
        if not (self.upscale == 3 or (self.upscale >= 1 and not self.upscale & (self.upscale - 1))):
            raise ValueError(f"DAT cannot upscale x{self.upscale} (2^n or 3).")


def shifted_block(group: int, block: int) -> bool:
    """Whether spatial block `block` of residual group `group` rolls its windows: blocks 2, 6, 10 ... of even
    groups and 0, 4, 8 ... of odd ones, DAT's staggered pattern (the blocks between are channel blocks)."""
    return (block % 4 == 2) if group % 2 == 0 else (block % 4 == 0)


class DynamicPosBias(nn.Module):
    """A small MLP from a relative offset (dy, dx) to one bias per head (CrossFormer's dynamic position bias)."""

    def __init__(self, width: int, num_heads: int) -> None:
        super().__init__()
        self.pos_proj = nn.Linear(2, width)
        self.pos1 = nn.Sequential(nn.LayerNorm(width), nn.ReLU(), nn.Linear(width, width))
        self.pos2 = nn.Sequential(nn.LayerNorm(width), nn.ReLU(), nn.Linear(width, width))
        self.pos3 = nn.Sequential(nn.LayerNorm(width), nn.ReLU(), nn.Linear(width, num_heads))

    def forward(self, offsets: torch.Tensor) -> torch.Tensor:
        return self.pos3(self.pos2(self.pos1(self.pos_proj(offsets))))


class WindowBranch(nn.Module):
    """Attention inside wh x ww windows for half of the channels, biased by `DynamicPosBias`."""

    def __init__(self, dim: int, num_heads: int, wh: int, ww: int) -> None:
        super().__init__()
        self.num_heads, self.wh, self.ww = num_heads, wh, ww
        self.pos = DynamicPosBias(dim // 4 // 4, num_heads)  # the original's width: a quarter of a quarter
        dy, dx = torch.meshgrid(torch.arange(1 - wh, wh), torch.arange(1 - ww, ww), indexing="ij")
        self.register_buffer("rpe_biases", torch.stack([dy, dx], -1).flatten(0, 1).float(), persistent=False)
        self.register_buffer("relative_position_index", relative_position_index(wh, ww), persistent=False)

    def forward(self, qkv: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """qkv (3, B, H, W, C) with H, W whole windows -> (B, H, W, C)."""
        _, b, h, w, c = qkv.shape
        n, heads = self.wh * self.ww, self.num_heads
        q, k, v = (partition(t, self.wh, self.ww).view(b, -1, n, heads, c // heads).transpose(2, 3)
                   for t in qkv.unbind(0))
        bias = self.pos(self.rpe_biases.to(qkv.dtype))[self.relative_position_index.view(-1)].view(n, n, -1)
        return merge(attend(q, k, v, bias.permute(2, 0, 1), mask), self.wh, self.ww, h, w)


def _interactions(dim: int) -> tuple[nn.Module, nn.Module, nn.Module]:
    """The convolution branch and the two gates both attention kinds use (the paper's adaptive interaction)."""
    dwconv = nn.Sequential(nn.Conv2d(dim, dim, 3, 1, 1, groups=dim), nn.BatchNorm2d(dim), nn.GELU())
    channel = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(dim, dim // 8, 1), nn.BatchNorm2d(dim // 8), nn.GELU(),
                            nn.Conv2d(dim // 8, dim, 1))
    spatial = nn.Sequential(nn.Conv2d(dim, dim // 16, 1), nn.BatchNorm2d(dim // 16), nn.GELU(), nn.Conv2d(dim // 16, 1, 1))
    return dwconv, channel, spatial


class SpatialAttention(nn.Module):
    """Window attention on two channel halves with transposed windows, gated against a depth-wise convolution."""

    def __init__(self, dim: int, num_heads: int, split_size: tuple[int, int], qkv_bias: bool, shifted: bool) -> None:
        super().__init__()
        self.split_size, self.shifted = split_size, shifted
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        s0, s1 = split_size
        self.attns = nn.ModuleList([WindowBranch(dim // 2, num_heads // 2, s0, s1),
                                    WindowBranch(dim // 2, num_heads // 2, s1, s0)])
        self.dwconv, self.channel_interaction, self.spatial_interaction = _interactions(dim)

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        b, length, c = x.shape
        qkv = self.qkv(x).view(b, h, w, 3, c).permute(3, 0, 1, 2, 4)  # (3, B, H, W, C)
        value = qkv[2].permute(0, 3, 1, 2)
        side = max(self.split_size)
        qkv = F.pad(qkv, (0, 0, 0, -w % side, 0, -h % side))  # zeros, as the original: they take part in attention
        padded_h, padded_w = qkv.shape[2:4]
        halves = []
        for branch, part in zip(self.attns, (qkv[..., :c // 2], qkv[..., c // 2:])):
            shift = (branch.wh // 2, branch.ww // 2) if self.shifted else (0, 0)
            mask = None
            if self.shifted:
                part = torch.roll(part, (-shift[0], -shift[1]), dims=(2, 3))
                mask = shift_mask(padded_h, padded_w, branch.wh, branch.ww, *shift, device=x.device)
            out = branch(part, mask)
            if self.shifted:
                out = torch.roll(out, shift, dims=(1, 2))
            halves.append(out[:, :h, :w].reshape(b, length, c // 2))
        attended = torch.cat(halves, -1)
        conv = self.dwconv(value)
        channel_gate = self.channel_interaction(conv).view(b, 1, c)
        spatial_gate = self.spatial_interaction(attended.transpose(1, 2).reshape(b, c, h, w))
        conv = (torch.sigmoid(spatial_gate) * conv).permute(0, 2, 3, 1).reshape(b, length, c)
        return self.proj(attended * torch.sigmoid(channel_gate) + conv)


class ChannelAttention(nn.Module):
    """Attention across channels (a head's channels attend to each other, XCiT style), with learned per-head
    temperatures; gated against a depth-wise convolution the other way round from `SpatialAttention`."""

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.temperature = nn.Parameter(torch.ones(num_heads, 1, 1))
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.dwconv, self.channel_interaction, self.spatial_interaction = _interactions(dim)

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        b, length, c = x.shape
        heads = self.num_heads
        q, k, v = self.qkv(x).view(b, length, 3, heads, c // heads).permute(2, 0, 3, 4, 1).unbind(0)  # (B, heads, d, N)
        # a per-head temperature on cosine similarities: not a scaled dot product, so a plain matmul
        scores = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1) * self.temperature
        attended = (scores.softmax(-1) @ v).permute(0, 3, 1, 2).reshape(b, length, c)
        conv = self.dwconv(v.reshape(b, c, h, w))
        channel_gate = self.channel_interaction(attended.transpose(1, 2).reshape(b, c, h, w))
        spatial_gate = self.spatial_interaction(conv).permute(0, 2, 3, 1).reshape(b, length, 1)
        conv = (conv * torch.sigmoid(channel_gate)).permute(0, 2, 3, 1).reshape(b, length, c)
        return self.proj(attended * torch.sigmoid(spatial_gate) + conv)


class SpatialGate(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.conv = nn.Conv2d(dim, dim, 3, 1, 1, groups=dim)


class GatedFeedForward(nn.Module):
    """The MLP whose hidden half is gated by a depth-wise convolution of the other half (the paper's SGFN)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.sg = SpatialGate(hidden // 2)
        self.fc2 = nn.Linear(hidden // 2, dim)

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        kept, gate = F.gelu(self.fc1(x)).chunk(2, -1)
        b, length, c = gate.shape
        gate = self.sg.conv(self.sg.norm(gate).transpose(1, 2).reshape(b, c, h, w)).flatten(2).transpose(1, 2)
        return self.fc2(kept * gate)


class DATBlock(nn.Module):
    def __init__(self, config: DATConfig, num_heads: int, group: int, index: int) -> None:
        super().__init__()
        dim = config.embed_dim
        self.norm1 = nn.LayerNorm(dim)
        self.attn = (SpatialAttention(dim, num_heads, config.split_size, config.qkv_bias, shifted_block(group, index))
                     if index % 2 == 0 else ChannelAttention(dim, num_heads, config.qkv_bias))
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = GatedFeedForward(dim, int(dim * config.expansion_factor))

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), h, w)
        return x + self.ffn(self.norm2(x), h, w)


class ResidualGroup(nn.Module):
    def __init__(self, config: DATConfig, depth: int, num_heads: int, group: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(DATBlock(config, num_heads, group, index) for index in range(depth))
        self.conv = conv_block(config.embed_dim, config.resi_connection)

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        y = x
        for block in self.blocks:
            y = block(y, h, w)
        b, length, c = y.shape
        return x + self.conv(y.transpose(1, 2).reshape(b, c, h, w)).flatten(2).transpose(1, 2)


class DAT(TransformerUpscaler):
    """RGB in [0, 1] -> RGB in [0, 1] at `config.scale` times the size, any input size."""

    architecture = "DAT"

    def __init__(self, config: DATConfig) -> None:
        super().__init__(config)
        # the original's [Rearrange, LayerNorm]
        self.before_RG = nn.Sequential(nn.Identity(), nn.LayerNorm(config.embed_dim))
        self.layers = nn.ModuleList(ResidualGroup(config, depth, heads, group)
                                    for group, (depth, heads) in enumerate(zip(config.depths, config.num_heads)))
        self.add_body_end()

    def deep_features(self, x: torch.Tensor) -> torch.Tensor:
        """The residual groups on (B, C, H, W) features of any size (spatial attention pads its own windows)."""
        h, w = x.shape[-2:]
        tokens = self.before_RG(x.flatten(2).transpose(1, 2))
        for layer in self.layers:
            tokens = layer(tokens, h, w)
        return self.norm(tokens).transpose(1, 2).reshape(x.shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_whole_windows(x)
