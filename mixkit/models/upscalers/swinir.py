"""SwinIR (Liang et al. 2021, "SwinIR: Image Restoration Using Swin Transformer"): a convolution, residual groups
of shifted-window transformer blocks, then one of four reconstruction heads.

The module and parameter names are those of the official `network_swinir.py` (`layers.N.residual_group.blocks.M
.attn.qkv`, `conv_after_body`, `conv_before_upsample.0`, `upsample.K`, `conv_up1` ...), so released files
(classical SR x2/x3/x4/x8, lightweight SR, Real-SwinIR M/L, denoising) load key for key. The shift masks and the
relative-position index are computed for each input size here; the copies the original stores in its files (sized
for its training patch) are ignored by `swinir_layout`. Inputs of any size are mirror-padded to whole windows and
the output cropped back, by the official test script's rule (`window_padding`), which A1111 copies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from mixkit.models.upscalers.transformer_frame import SwinTransformerUpscaler, conv_block
from mixkit.models.upscalers.windows import (ATTENTION_CHUNK_SCORES, MAX_BLOCKS, MAX_WINDOW_TOKENS, attend, merge,
                                             partition, relative_position_index)

UPSAMPLERS = ("pixelshuffle", "pixelshuffledirect", "nearest+conv", "")
RESI_CONNECTIONS = ("1conv", "3conv")


@dataclass(frozen=True)
class SwinIRConfig:
    in_channels: int = 3
    out_channels: int = 3
    embed_dim: int = 180
    depths: tuple[int, ...] = (6, 6, 6, 6, 6, 6)
    num_heads: tuple[int, ...] = (6, 6, 6, 6, 6, 6)
    window_size: int = 8
    mlp_ratio: float = 2.0
    qkv_bias: bool = True
    patch_norm: bool = True
    upsampler: str = "pixelshuffle"  # one of UPSAMPLERS; "" = same-size restoration (denoising, JPEG)
    upscale: int = 4
    resi_connection: str = "1conv"
    num_feat: int = 64  # the reconstruction head's channels (pixelshuffle, nearest+conv)
    img_range: float = 1.0  # not stored in files; every released model uses 1.0

    @property
    def scale(self) -> int:
        return self.upscale

    def __post_init__(self) -> None:
        if self.upsampler not in UPSAMPLERS:
            raise ValueError(f"SwinIR upsampler must be one of {UPSAMPLERS}, got {self.upsampler!r}.")
        if self.resi_connection not in RESI_CONNECTIONS:
            raise ValueError(f"SwinIR resi_connection must be one of {RESI_CONNECTIONS}, got {self.resi_connection!r}.")
        if len(self.depths) != len(self.num_heads) or not self.depths:
            raise ValueError(f"SwinIR needs one head count per layer: depths {self.depths}, num_heads {self.num_heads}.")
        if sum(self.depths) > MAX_BLOCKS:
            raise ValueError(f"SwinIR may have at most {MAX_BLOCKS} blocks in all, got {sum(self.depths)} (depths "
                             f"{self.depths[:8]}{' ...' if len(self.depths) > 8 else ''}).")
        if not 1 <= self.window_size ** 2 <= MAX_WINDOW_TOKENS:
            raise ValueError(f"SwinIR window_size must be 1 to {math.isqrt(MAX_WINDOW_TOKENS)} (released models use 8), "
                             f"got {self.window_size}.")
        if any(self.embed_dim % heads for heads in self.num_heads):
            raise ValueError(f"embed_dim {self.embed_dim} is not divisible by every head count {self.num_heads}.")
        valid_scale = {"pixelshuffle": self.upscale == 3 or (self.upscale >= 2 and not self.upscale & (self.upscale - 1)),
                       "pixelshuffledirect": self.upscale >= 1, "nearest+conv": self.upscale in (2, 4),
                       "": self.upscale == 1}[self.upsampler]
        if not valid_scale:
            raise ValueError(f"SwinIR upsampler {self.upsampler!r} cannot upscale x{self.upscale} (pixelshuffle: 2^n or "
                             "3; nearest+conv: 2 or 4; no upsampler: 1).")


class WindowAttention(nn.Module):
    """Multi-head self-attention inside each window, with a learned bias per relative offset and head."""

    def __init__(self, dim: int, window_size: int, num_heads: int, qkv_bias: bool) -> None:
        super().__init__()
        self.num_heads, self.window_size = num_heads, window_size
        span = 2 * window_size - 1
        self.relative_position_bias_table = nn.Parameter(nn.init.trunc_normal_(torch.empty(span * span, num_heads), std=0.02))
        # non-persistent: the original stores it, but it only depends on window_size
        self.register_buffer("relative_position_index", relative_position_index(window_size, window_size),
                             persistent=False)
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def position_bias(self) -> torch.Tensor:
        n = self.window_size ** 2
        return self.relative_position_bias_table[self.relative_position_index.view(-1)].view(n, n, -1).permute(2, 0, 1)

    def forward(self, windows: torch.Tensor, mask: torch.Tensor | None,
                chunk_scores: int = ATTENTION_CHUNK_SCORES) -> torch.Tensor:
        """windows (B, W, N, C); mask (W, N, N) or None -> (B, W, N, C)."""
        b, count, n, c = windows.shape
        heads = self.num_heads
        q, k, v = self.qkv(windows).view(b, count, n, 3, heads, c // heads).permute(3, 0, 1, 4, 2, 5).unbind(0)
        return self.proj(attend(q, k, v, self.position_bias(), mask, chunk_scores))


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class SwinBlock(nn.Module):
    """Pre-norm window attention and MLP; odd blocks roll the image by half a window first (shifted windows)."""

    def __init__(self, dim: int, num_heads: int, window_size: int, shifted: bool, config: SwinIRConfig) -> None:
        super().__init__()
        self.window_size, self.shift = window_size, window_size // 2 if shifted else 0
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, window_size, num_heads, config.qkv_bias)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, round(dim * config.mlp_ratio))  # round: a ratio read from a file may be 1.999...

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B, H, W, C) with H, W whole windows; `mask` is used by shifted blocks only."""
        h, w = x.shape[1:3]
        y = self.norm1(x)
        if self.shift:
            y = torch.roll(y, (-self.shift, -self.shift), dims=(1, 2))
        size = self.window_size
        y = merge(self.attn(partition(y, size, size), mask if self.shift else None), size, size, h, w)
        if self.shift:
            y = torch.roll(y, (self.shift, self.shift), dims=(1, 2))
        x = x + y
        return x + self.mlp(self.norm2(x))


class ResidualGroup(nn.Module):
    """Transformer blocks, a convolution, and a skip around both (the paper's RSTB)."""

    def __init__(self, config: SwinIRConfig, depth: int, num_heads: int) -> None:
        super().__init__()
        self.residual_group = nn.Module()  # the original nests the blocks one level deeper; kept for its key names
        self.residual_group.blocks = nn.ModuleList(
            SwinBlock(config.embed_dim, num_heads, config.window_size, index % 2 == 1, config) for index in range(depth))
        self.conv = conv_block(config.embed_dim, config.resi_connection)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        y = x
        for block in self.residual_group.blocks:
            y = block(y, mask)
        return x + self.conv(y.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


def window_padding(side: int, window: int) -> int:
    """Pixels added to a side before the network: up to the next whole window, and a full window more when the side
    is already whole windows. This is the official main_test_swinir.py rule (and A1111's), so outputs near the
    bottom and right edges equal theirs; the extra window costs a little time on aligned sizes."""
    return (side // window + 1) * window - side


def mirror_pad(x: torch.Tensor, pad_h: int, pad_w: int) -> torch.Tensor:
    """Extend the bottom and right edges by their mirror image (edge pixel repeated, as the official test script's
    flip-and-concatenate); an image smaller than its pad is mirrored again until it is large enough."""
    for dim, pad in ((2, pad_h), (3, pad_w)):
        target = x.shape[dim] + pad
        while x.shape[dim] < target:
            x = torch.cat([x, torch.flip(x, [dim])], dim)
        x = x.narrow(dim, 0, target)
    return x


class SwinIR(SwinTransformerUpscaler):
    """RGB in [0, 1] -> RGB in [0, 1] at `config.scale` times the size, any input size."""

    architecture = "SwinIR"

    def __init__(self, config: SwinIRConfig) -> None:
        super().__init__(config, lambda depth, heads: ResidualGroup(config, depth, heads))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        height, width = x.shape[-2:]
        size = self.config.window_size
        out = self.forward_whole_windows(mirror_pad(x, window_padding(height, size), window_padding(width, size)))
        return out[..., :height * self.scale, :width * self.scale]
