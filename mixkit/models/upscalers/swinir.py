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

from mixkit.models.upscalers.windows import (ATTENTION_CHUNK_SCORES, MAX_BLOCKS, MAX_WINDOW_TOKENS, attend, merge,
                                             partition, relative_position_index, shift_mask)

UPSAMPLERS = ("pixelshuffle", "pixelshuffledirect", "nearest+conv", "")
RESI_CONNECTIONS = ("1conv", "3conv")
RGB_MEAN = (0.4488, 0.4371, 0.4040)  # DIV2K's mean, subtracted by every released RGB SwinIR


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


def reconstruction_modules(config, dim: int) -> dict[str, nn.Module]:
    """The image reconstruction head's modules by attribute name, for `config.upsampler` (SwinIR's four, DAT's
    first two): 'pixelshuffle' (classical SR), 'pixelshuffledirect' (lightweight), 'nearest+conv' (real-world SR,
    fewer artifacts), '' (same-size restoration)."""
    feat, out = config.num_feat, config.out_channels
    modules: dict[str, nn.Module] = {}
    if config.upsampler in ("pixelshuffle", "nearest+conv"):
        modules["conv_before_upsample"] = nn.Sequential(nn.Conv2d(dim, feat, 3, 1, 1), nn.LeakyReLU())
    if config.upsampler == "pixelshuffle":
        steps = [3] if config.upscale == 3 else [2] * (config.upscale.bit_length() - 1)
        modules["upsample"] = nn.Sequential(*(layer for step in steps for layer in
                                              (nn.Conv2d(feat, step * step * feat, 3, 1, 1), nn.PixelShuffle(step))))
        modules["conv_last"] = nn.Conv2d(feat, out, 3, 1, 1)
    elif config.upsampler == "pixelshuffledirect":
        modules["upsample"] = nn.Sequential(nn.Conv2d(dim, config.upscale ** 2 * out, 3, 1, 1),
                                            nn.PixelShuffle(config.upscale))
    elif config.upsampler == "nearest+conv":
        modules["conv_up1"] = nn.Conv2d(feat, feat, 3, 1, 1)
        if config.upscale == 4:
            modules["conv_up2"] = nn.Conv2d(feat, feat, 3, 1, 1)
        modules["conv_hr"] = nn.Conv2d(feat, feat, 3, 1, 1)
        modules["conv_last"] = nn.Conv2d(feat, out, 3, 1, 1)
    else:
        modules["conv_last"] = nn.Conv2d(dim, out, 3, 1, 1)
    return modules


def reconstruct(network: nn.Module, features: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The head made by `reconstruction_modules` on deep `features` (x: the normalised input, which the same-size
    head adds its output to)."""
    upsampler = network.config.upsampler
    if upsampler == "pixelshuffle":
        return network.conv_last(network.upsample(network.conv_before_upsample(features)))
    if upsampler == "pixelshuffledirect":
        return network.upsample(features)
    if upsampler == "nearest+conv":
        out = network.conv_before_upsample(features)
        for conv in (network.conv_up1, getattr(network, "conv_up2", None)):
            if conv is not None:
                out = F.leaky_relu(conv(F.interpolate(out, scale_factor=2, mode="nearest")), 0.2)
        return network.conv_last(F.leaky_relu(network.conv_hr(out), 0.2))
    return x + network.conv_last(features)


def conv_block(dim: int, resi_connection: str) -> nn.Module:
    """The convolution closing a residual group: one 3x3, or '3conv' (3x3 to dim/4, 1x1, 3x3 back) to save weights."""
    if resi_connection == "1conv":
        return nn.Conv2d(dim, dim, 3, 1, 1)
    quarter = dim // 4
    return nn.Sequential(nn.Conv2d(dim, quarter, 3, 1, 1), nn.LeakyReLU(0.2), nn.Conv2d(quarter, quarter, 1, 1, 0),
                         nn.LeakyReLU(0.2), nn.Conv2d(quarter, dim, 3, 1, 1))


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


class SwinIR(nn.Module):
    """RGB in [0, 1] -> RGB in [0, 1] at `config.scale` times the size, any input size."""

    architecture = "SwinIR"

    def __init__(self, config: SwinIRConfig) -> None:
        super().__init__()
        self.config = config
        self.scale = config.scale
        dim = config.embed_dim
        mean = RGB_MEAN if config.in_channels == 3 else (0.0,) * config.in_channels
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1), persistent=False)
        self.conv_first = nn.Conv2d(config.in_channels, dim, 3, 1, 1)
        if config.patch_norm:
            self.patch_embed = nn.Module()
            self.patch_embed.norm = nn.LayerNorm(dim)
        self.layers = nn.ModuleList(ResidualGroup(config, depth, heads)
                                    for depth, heads in zip(config.depths, config.num_heads))
        self.norm = nn.LayerNorm(dim)
        self.conv_after_body = conv_block(dim, config.resi_connection)
        for name, module in reconstruction_modules(config, dim).items():
            setattr(self, name, module)

    def deep_features(self, x: torch.Tensor) -> torch.Tensor:
        """The residual groups on (B, C, H, W) features whose sides are whole windows."""
        h, w = x.shape[-2:]
        size = self.config.window_size
        mask = shift_mask(h, w, size, size, size // 2, size // 2, device=x.device)
        tokens = x.permute(0, 2, 3, 1)
        if self.config.patch_norm:
            tokens = self.patch_embed.norm(tokens)
        for layer in self.layers:
            tokens = layer(tokens, mask)
        return self.norm(tokens).permute(0, 3, 1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        height, width = x.shape[-2:]
        size = self.config.window_size
        out = self.forward_whole_windows(mirror_pad(x, window_padding(height, size), window_padding(width, size)))
        return out[..., :height * self.scale, :width * self.scale]

    def forward_whole_windows(self, x: torch.Tensor) -> torch.Tensor:
        """The network itself, on an input whose sides are whole windows (the official module's forward)."""
        x = (x - self.mean.to(x.dtype)) * self.config.img_range
        first = self.conv_first(x)
        features = self.conv_after_body(self.deep_features(first)) + first
        out = reconstruct(self, features, x)
        return out / self.config.img_range + self.mean.to(out.dtype)
