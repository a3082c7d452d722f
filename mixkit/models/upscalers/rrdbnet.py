"""ESRGAN's generator (Wang et al. 2018, "ESRGAN"): residual-in-residual dense blocks, then nearest x2 upsamples.

Real-ESRGAN's x2 and x1 models (BasicSR) reuse the x4 network on a pixel-unshuffled input: a 2x2 (or 4x4) block of
pixels becomes 4 (16) channels, so the network's x4 output is x2 (x1) of the original. The module names are
BasicSR's (`conv_first`, `body.N.rdb1.conv1`, `conv_up1` ...); `layouts` maps the older ESRGAN names onto them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

LEAKY_SLOPE = 0.2
RESIDUAL_SCALE = 0.2  # both residuals are scaled down before the skip-add (the paper's "residual scaling")


@dataclass(frozen=True)
class RRDBNetConfig:
    in_channels: int = 3  # conv_first's input: 3, or 12 / 48 after a 2x2 / 4x4 pixel unshuffle
    out_channels: int = 3
    features: int = 64
    growth: int = 32  # channels each dense-block convolution adds
    blocks: int = 23
    upsamples: int = 2  # nearest x2 + conv stages; 2 -> the network body is x4

    @property
    def unshuffle(self) -> int:
        """The pixel-unshuffle factor the input channel count implies (1, 2 or 4)."""
        return {1: 1, 4: 2, 16: 4}[self.in_channels // self.out_channels]

    @property
    def scale(self) -> int | float:
        factor = 2 ** self.upsamples / self.unshuffle
        return int(factor) if factor == int(factor) else factor


class ResidualDenseBlock(nn.Module):
    """Five 3x3 convolutions, each fed every earlier output (dense connections)."""

    def __init__(self, features: int, growth: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(features, growth, 3, 1, 1)
        self.conv2 = nn.Conv2d(features + growth, growth, 3, 1, 1)
        self.conv3 = nn.Conv2d(features + 2 * growth, growth, 3, 1, 1)
        self.conv4 = nn.Conv2d(features + 3 * growth, growth, 3, 1, 1)
        self.conv5 = nn.Conv2d(features + 4 * growth, features, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs = [x]
        for conv in (self.conv1, self.conv2, self.conv3, self.conv4):
            outputs.append(F.leaky_relu(conv(torch.cat(outputs, 1)), LEAKY_SLOPE))
        return x + RESIDUAL_SCALE * self.conv5(torch.cat(outputs, 1))


class RRDB(nn.Module):
    """Three dense blocks with a scaled skip around them."""

    def __init__(self, features: int, growth: int) -> None:
        super().__init__()
        self.rdb1 = ResidualDenseBlock(features, growth)
        self.rdb2 = ResidualDenseBlock(features, growth)
        self.rdb3 = ResidualDenseBlock(features, growth)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + RESIDUAL_SCALE * self.rdb3(self.rdb2(self.rdb1(x)))


class RRDBNet(nn.Module):
    """RGB in [0, 1] -> RGB in [0, 1] at `config.scale` times the size."""

    architecture = "ESRGAN"

    def __init__(self, config: RRDBNetConfig) -> None:
        super().__init__()
        self.config = config
        self.scale = config.scale
        f = config.features
        self.conv_first = nn.Conv2d(config.in_channels, f, 3, 1, 1)
        self.body = nn.Sequential(*(RRDB(f, config.growth) for _ in range(config.blocks)))
        self.conv_body = nn.Conv2d(f, f, 3, 1, 1)
        self.ups = nn.ModuleList(nn.Conv2d(f, f, 3, 1, 1) for _ in range(config.upsamples))
        self.conv_hr = nn.Conv2d(f, f, 3, 1, 1)
        self.conv_last = nn.Conv2d(f, config.out_channels, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        height, width = x.shape[-2:]
        factor = self.config.unshuffle
        if factor > 1:
            # the unshuffle needs whole factor x factor cells: mirror-pad the far edges, crop the output back
            pad_h, pad_w = -height % factor, -width % factor
            mode = "reflect" if pad_h < height and pad_w < width else "replicate"
            x = F.pixel_unshuffle(F.pad(x, (0, pad_w, 0, pad_h), mode=mode), factor)
        feat = self.conv_first(x)
        feat = feat + self.conv_body(self.body(feat))
        for conv in self.ups:
            feat = F.leaky_relu(conv(F.interpolate(feat, scale_factor=2, mode="nearest")), LEAKY_SLOPE)
        out = self.conv_last(F.leaky_relu(self.conv_hr(feat), LEAKY_SLOPE))
        return out[..., :round(height * self.scale), :round(width * self.scale)] if factor > 1 else out
