"""HAT (Chen et al. 2023, "Activating More Pixels in Image Super-Resolution Transformer"): SwinIR's design with
hybrid attention blocks (window attention plus a small channel-attention convolution, scaled by 0.01) and, closing
each residual group, an overlapping cross-attention block whose keys come from windows larger than its queries'.

A1111 (1.8+, through spandrel) runs HAT files from its ESRGAN folder: HAT-S/HAT/HAT-L SRx2/x3/x4, Real_HAT_GAN_SRx4,
community models such as 4xNomos8kHAT-L. Module and parameter names are those of the official `hat_arch.py`
(`layers.N.residual_group.blocks.M.conv_block.cab.0`, `layers.N.residual_group.overlap_attn.qkv` ...), so released
files load key for key. The relative-position indices the original stores (`relative_position_index_SA/OCA`) are
computed here. Inputs of any size are reflect-padded to whole windows and the output cropped back, as spandrel does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from mixkit.attention import attention
from mixkit.models.upscalers.swinir import Mlp, WindowAttention
from mixkit.models.upscalers.transformer_frame import SwinTransformerUpscaler, conv_block
from mixkit.models.upscalers.windows import (ATTENTION_CHUNK_SCORES, MAX_BLOCKS, MAX_WINDOW_TOKENS, merge, partition,
                                             reflect_pad_to_multiple)

RESI_CONNECTIONS = ("1conv", "identity")


@dataclass(frozen=True)
class HATConfig:
    in_channels: int = 3
    out_channels: int = 3
    embed_dim: int = 180
    depths: tuple[int, ...] = (6, 6, 6, 6, 6, 6)
    num_heads: tuple[int, ...] = (6, 6, 6, 6, 6, 6)
    window_size: int = 16
    # the overlapping cross-attention's key window: window_size + int(overlap_ratio * window_size), 24 for the
    # released 16 and 0.5; kept as a side so that a file's size is read back exactly
    overlap_window_size: int = 24
    cab_channels: int = 60  # the channel-attention block's inner width: embed_dim // compress_ratio
    squeeze_channels: int = 6  # its squeeze-excitation width: embed_dim // squeeze_factor
    conv_scale: float = 0.01  # not stored in files; every released model uses 0.01
    mlp_ratio: float = 2.0
    qkv_bias: bool = True
    patch_norm: bool = True
    upsampler: str = "pixelshuffle"  # the only head the official network defines
    upscale: int = 4
    resi_connection: str = "1conv"
    num_feat: int = 64
    img_range: float = 1.0  # not stored in files; every released model uses 1.0

    @property
    def scale(self) -> int:
        return self.upscale

    @property
    def overlap_ratio(self) -> float:
        return (self.overlap_window_size - self.window_size) / self.window_size

    def __post_init__(self) -> None:
        if self.upsampler != "pixelshuffle":
            raise ValueError(f"HAT upsampler must be 'pixelshuffle' (the official network has no other), got "
                             f"{self.upsampler!r}.")
        if self.upscale != 3 and (self.upscale < 2 or self.upscale & (self.upscale - 1)):
            raise ValueError(f"HAT's pixelshuffle head upscales x2^n or x3, got x{self.upscale}.")
        if self.resi_connection not in RESI_CONNECTIONS:
            raise ValueError(f"HAT resi_connection must be one of {RESI_CONNECTIONS}, got {self.resi_connection!r}.")
        if len(self.depths) != len(self.num_heads) or not self.depths:
            raise ValueError(f"HAT needs one head count per layer: depths {self.depths}, num_heads {self.num_heads}.")
        if sum(self.depths) > MAX_BLOCKS:
            raise ValueError(f"HAT may have at most {MAX_BLOCKS} blocks in all, got {sum(self.depths)}.")
        if not 1 <= self.window_size ** 2 <= MAX_WINDOW_TOKENS or self.window_size < 2:
            raise ValueError(f"HAT window_size must be 2 to {math.isqrt(MAX_WINDOW_TOKENS)} (released models use 16), "
                             f"got {self.window_size}.")
        extra = self.overlap_window_size - self.window_size
        if extra < 0 or extra % 2:
            raise ValueError(f"HAT overlap_window_size must exceed window_size {self.window_size} by an even number of "
                             f"pixels (the unfold pads it equally on both sides), got {self.overlap_window_size}.")
        if self.overlap_window_size ** 2 > 4 * MAX_WINDOW_TOKENS:  # released: 24 x 24 key windows
            raise ValueError(f"HAT overlap_window_size may be at most {math.isqrt(4 * MAX_WINDOW_TOKENS)} (released "
                             f"models use 24), got {self.overlap_window_size}.")
        if any(self.embed_dim % heads for heads in self.num_heads):
            raise ValueError(f"embed_dim {self.embed_dim} is not divisible by every head count {self.num_heads}.")
        if self.cab_channels < 1 or self.squeeze_channels < 1:
            raise ValueError(f"HAT cab_channels and squeeze_channels must be positive, got {self.cab_channels} and "
                             f"{self.squeeze_channels}.")


def overlap_position_index(window: int, overlap: int) -> torch.Tensor:
    """(window², overlap²) index of each (query, key) pair into the cross-attention's bias table of
    (window + overlap - 1)² rows, by the official `calculate_rpi_oca` formula. Its offsets (key - query coordinate,
    shifted by window - overlap + 1) can be negative, which the original's indexing wraps from the table's end;
    the wrap is applied here so the same rows are read."""
    def coords(side: int) -> torch.Tensor:
        return torch.stack(torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")).flatten(1)

    offsets = coords(overlap)[:, None, :] - coords(window)[:, :, None] + (window - overlap + 1)
    span = window + overlap - 1
    return (offsets[0] * span + offsets[1]) % (span * span)


class SqueezeExcitation(nn.Module):
    """Channel attention: each channel scaled by a gate computed from the channels' means (`ChannelAttention`)."""

    def __init__(self, dim: int, squeeze: int) -> None:
        super().__init__()
        self.attention = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(dim, squeeze, 1), nn.ReLU(),
                                       nn.Conv2d(squeeze, dim, 1), nn.Sigmoid())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.attention(x)


class ChannelAttentionBlock(nn.Module):
    """The hybrid block's convolution branch (the official `CAB`): conv, GELU, conv, then channel attention."""

    def __init__(self, dim: int, inner: int, squeeze: int) -> None:
        super().__init__()
        self.cab = nn.Sequential(nn.Conv2d(dim, inner, 3, 1, 1), nn.GELU(), nn.Conv2d(inner, dim, 3, 1, 1),
                                 SqueezeExcitation(dim, squeeze))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cab(x)


class HybridAttentionBlock(nn.Module):
    """Window attention (shifted in odd blocks) plus the scaled channel-attention branch, then an MLP (`HAB`)."""

    def __init__(self, config: HATConfig, num_heads: int, shifted: bool) -> None:
        super().__init__()
        dim = config.embed_dim
        self.window_size, self.conv_scale = config.window_size, config.conv_scale
        self.shift = config.window_size // 2 if shifted else 0
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, config.window_size, num_heads, config.qkv_bias)
        self.conv_block = ChannelAttentionBlock(dim, config.cab_channels, config.squeeze_channels)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(round(dim * config.mlp_ratio)))

    def forward(self, x: torch.Tensor, mask: torch.Tensor, chunk_scores: int = ATTENTION_CHUNK_SCORES) -> torch.Tensor:
        """x (B, H, W, C) with H, W whole windows."""
        h, w = x.shape[1:3]
        y = self.norm1(x)
        conv = self.conv_block(y.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        if self.shift:
            y = torch.roll(y, (-self.shift, -self.shift), dims=(1, 2))
        size = self.window_size
        y = merge(self.attn(partition(y, size, size), mask if self.shift else None, chunk_scores), size, size, h, w)
        if self.shift:
            y = torch.roll(y, (self.shift, self.shift), dims=(1, 2))
        x = x + y + conv * self.conv_scale
        return x + self.mlp(self.norm2(x))


class OverlappingCrossAttention(nn.Module):
    """Queries from each window attend to keys and values from a larger window centred on it (zero-padded at the
    image edges), then an MLP (`OCAB`)."""

    def __init__(self, config: HATConfig, num_heads: int) -> None:
        super().__init__()
        dim, window, overlap = config.embed_dim, config.window_size, config.overlap_window_size
        self.window_size, self.overlap_window_size, self.num_heads = window, overlap, num_heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=config.qkv_bias)
        span = window + overlap - 1
        self.relative_position_bias_table = nn.Parameter(nn.init.trunc_normal_(torch.empty(span * span, num_heads),
                                                                               std=0.02))
        self.register_buffer("relative_position_index", overlap_position_index(window, overlap), persistent=False)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(round(dim * config.mlp_ratio)))

    def forward(self, x: torch.Tensor, chunk_scores: int = ATTENTION_CHUNK_SCORES) -> torch.Tensor:
        b, h, w, c = x.shape
        window, overlap, heads = self.window_size, self.overlap_window_size, self.num_heads
        q, k, v = self.qkv(self.norm1(x)).view(b, h, w, 3, c).unbind(3)
        q = partition(q, window, window)  # (B, windows, window², C)
        keys_values = F.unfold(torch.cat((k, v), -1).permute(0, 3, 1, 2), overlap, padding=(overlap - window) // 2,
                               stride=window)  # (B, 2C * overlap², windows), channels major
        k, v = keys_values.view(b, 2, c, overlap * overlap, -1).permute(1, 0, 4, 3, 2).unbind(0)
        bias = self.relative_position_bias_table[self.relative_position_index].permute(2, 0, 1).to(x.dtype)
        count, nq, nk = q.shape[1], q.shape[2], k.shape[2]
        step = max(1, chunk_scores // (b * heads * nq * nk))
        outputs = []
        for start in range(0, count, step):  # a whole image's scores would not fit: 1024 windows are ~3.6 GB at HAT's
            qc, kc, vc = (t[:, start:start + step] for t in (q, k, v))
            windows = qc.shape[1]
            out = attention(qc.reshape(b * windows, nq, heads, -1).transpose(1, 2),
                            kc.reshape(b * windows, nk, heads, -1).transpose(1, 2),
                            vc.reshape(b * windows, nk, heads, -1).transpose(1, 2), attn_mask=bias)
            outputs.append(out.transpose(1, 2).reshape(b, windows, nq, c))
        attended = merge(torch.cat(outputs, 1), window, window, h, w)
        x = x + self.proj(attended)
        return x + self.mlp(self.norm2(x))


class ResidualHybridAttentionGroup(nn.Module):
    """Hybrid attention blocks, an overlapping cross-attention block, a convolution, and a skip (`RHAG`)."""

    def __init__(self, config: HATConfig, depth: int, num_heads: int) -> None:
        super().__init__()
        self.residual_group = nn.Module()  # the original's nesting, kept for its key names
        self.residual_group.blocks = nn.ModuleList(HybridAttentionBlock(config, num_heads, index % 2 == 1)
                                                   for index in range(depth))
        self.residual_group.overlap_attn = OverlappingCrossAttention(config, num_heads)
        self.conv = conv_block(config.embed_dim, config.resi_connection)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        y = x
        for block in self.residual_group.blocks:
            y = block(y, mask)
        y = self.residual_group.overlap_attn(y)
        return x + self.conv(y.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


class HAT(SwinTransformerUpscaler):
    """RGB in [0, 1] -> RGB in [0, 1] at `config.scale` times the size, any input size."""

    architecture = "HAT"

    def __init__(self, config: HATConfig) -> None:
        super().__init__(config, lambda depth, heads: ResidualHybridAttentionGroup(config, depth, heads))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        height, width = x.shape[-2:]
        out = self.forward_whole_windows(reflect_pad_to_multiple(x, self.config.window_size))
        return out[..., :height * self.scale, :width * self.scale]
