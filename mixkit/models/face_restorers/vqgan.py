"""The VQGAN encoder and generator CodeFormer is built on (Esser et al. 2021, as adapted by "Unleashing
Transformers" and CodeFormer's `vqgan_arch.py`): flat lists of blocks, so the files' keys are `encoder.blocks.N...`
and `generator.blocks.N...` with N counting convolutions, residual blocks, attention blocks and resamplers alike.

`block_plan` lays the list out from the sizes; `layouts` reads the sizes back from a file's block keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

GROUPS = 32  # GroupNorm groups of every normalisation (not stored in the files)


def group_norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(GROUPS, channels, eps=1e-6)


class ResBlock(nn.Module):
    """GroupNorm, swish, 3x3 conv, twice; a 1x1 `conv_out` projects the input when the width changes."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.norm1 = group_norm(in_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.norm2 = group_norm(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1)
        self.conv_out = nn.Conv2d(in_channels, out_channels, 1) if in_channels != out_channels else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv1(F.silu(self.norm1(x)))
        out = self.conv2(F.silu(self.norm2(out)))
        return out + (self.conv_out(x) if self.conv_out is not None else x)


class AttnBlock(nn.Module):
    """Single-head self-attention over all positions of a feature map (1x1 convs for q, k, v and the output)."""

    def __init__(self, channels: int):
        super().__init__()
        self.norm = group_norm(channels)
        self.q, self.k, self.v, self.proj_out = (nn.Conv2d(channels, channels, 1) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from mixkit.attention import attention

        batch, channels, height, width = x.shape
        normed = self.norm(x)
        q, k, v = (layer(normed).flatten(2).transpose(1, 2)[:, None] for layer in (self.q, self.k, self.v))
        out = attention(q, k, v)[:, 0].transpose(1, 2).reshape(batch, channels, height, width)
        return x + self.proj_out(out)


class Downsample(nn.Module):
    """Stride-2 3x3 conv after padding one zero row and column at the bottom and right (VQGAN's asymmetric pad)."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, (0, 1, 0, 1)))


class Upsample(nn.Module):
    """Nearest x2, then a 3x3 conv."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


@dataclass(frozen=True)
class VQGANSizes:
    """The autoencoder's sizes; the defaults are every released CodeFormer's (CodeFormer hard-codes them)."""

    base_channels: int = 64  # the original's `nf`
    channel_multipliers: tuple[int, ...] = (1, 2, 2, 4, 4, 8)  # per resolution level, from the image down
    res_blocks: int = 2  # per level
    attn_resolutions: tuple[int, ...] = (16,)
    code_dim: int = 256  # the codebook vectors' width (`emb_dim`)
    image_size: int = 512

    @property
    def latent_side(self) -> int:
        return self.image_size // 2 ** (len(self.channel_multipliers) - 1)

    def width(self, level: int) -> int:
        return self.base_channels * self.channel_multipliers[level]


def encoder_plan(sizes: VQGANSizes) -> tuple[list[tuple[str, int, int]], dict[int, int]]:
    """The encoder's blocks as (kind, in, out) in file order, and {resolution: block index whose output CodeFormer
    fuses} (each level's last residual block: the official table 512:2, 256:5, 128:8, 64:11, 32:14, 16:18)."""
    plan, taps = [("conv", 3, sizes.base_channels)], {}
    channels, resolution = sizes.base_channels, sizes.image_size
    for level in range(len(sizes.channel_multipliers)):
        for _ in range(sizes.res_blocks):
            plan.append(("res", channels, sizes.width(level)))
            channels = sizes.width(level)
            taps[resolution] = len(plan) - 1
            if resolution in sizes.attn_resolutions:
                plan.append(("attn", channels, channels))
        if level != len(sizes.channel_multipliers) - 1:
            plan.append(("down", channels, channels))
            resolution //= 2
    plan += [("res", channels, channels), ("attn", channels, channels), ("res", channels, channels),
             ("norm", channels, channels), ("conv", channels, sizes.code_dim)]
    return plan, taps


def generator_plan(sizes: VQGANSizes) -> tuple[list[tuple[str, int, int]], dict[int, int]]:
    """The generator's blocks, and {resolution: block index after which CodeFormer fuses the encoder's features}:
    the first residual block of each level, except at the latent resolution, where it is the last one (the official
    table 16:6, 32:9, 64:12, 128:15, 256:18, 512:21)."""
    channels = sizes.width(-1)
    plan = [("conv", sizes.code_dim, channels), ("res", channels, channels), ("attn", channels, channels),
            ("res", channels, channels)]
    taps, resolution = {}, sizes.latent_side
    for level in reversed(range(len(sizes.channel_multipliers))):
        for block in range(sizes.res_blocks):
            plan.append(("res", channels, sizes.width(level)))
            channels = sizes.width(level)
            if block == 0 or resolution == sizes.latent_side:
                taps[resolution] = len(plan) - 1
            if resolution in sizes.attn_resolutions:
                plan.append(("attn", channels, channels))
        if level != 0:
            plan.append(("up", channels, channels))
            resolution *= 2
    plan += [("norm", channels, channels), ("conv", channels, 3)]
    return plan, taps


def build_blocks(plan: list[tuple[str, int, int]]) -> nn.ModuleList:
    makers = {"conv": lambda i, o: nn.Conv2d(i, o, 3, padding=1), "res": ResBlock, "attn": lambda i, o: AttnBlock(i),
              "down": lambda i, o: Downsample(i), "up": lambda i, o: Upsample(i), "norm": lambda i, o: group_norm(i)}
    return nn.ModuleList(makers[kind](in_channels, out_channels) for kind, in_channels, out_channels in plan)


class BlockStack(nn.Module):
    """A VQGAN encoder or generator: its `blocks` only (the file's `encoder.blocks.N` / `generator.blocks.N`)."""

    def __init__(self, plan: list[tuple[str, int, int]]):
        super().__init__()
        self.blocks = build_blocks(plan)


class Codebook(nn.Module):
    """The learned code vectors (`quantize.embedding.weight`, [codebook_size, code_dim])."""

    def __init__(self, codebook_size: int, code_dim: int):
        super().__init__()
        self.embedding = nn.Embedding(codebook_size, code_dim)

    def lookup(self, indices: torch.Tensor, side: int) -> torch.Tensor:
        """Code vectors of `indices` [B, side*side] (row-major positions) as a feature map [B, code_dim, side, side]."""
        codes = self.embedding.weight[indices]
        return codes.view(indices.shape[0], side, side, -1).permute(0, 3, 1, 2).contiguous()
