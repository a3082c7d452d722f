"""Real-ESRGAN's compact network (SRVGGNetCompact): a plain stack of 3x3 convolutions with PReLU, a pixel shuffle,
and the nearest-upsampled input added back, so the convolutions only learn the residual.

realesr-general-x4v3 has 32 inner convolutions of 64 features, realesr-animevideov3 16; both are x4.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class SRVGGConfig:
    in_channels: int = 3
    out_channels: int = 3
    features: int = 64
    convs: int = 32  # inner convolutions between the first and the last
    scale: int = 4


class SRVGGNetCompact(nn.Module):
    """RGB in [0, 1] -> RGB in [0, 1] at `config.scale` times the size."""

    architecture = "SRVGG"

    def __init__(self, config: SRVGGConfig) -> None:
        super().__init__()
        self.config = config
        self.scale = config.scale
        f = config.features
        layers: list[nn.Module] = [nn.Conv2d(config.in_channels, f, 3, 1, 1), nn.PReLU(num_parameters=f)]
        for _ in range(config.convs):
            layers += [nn.Conv2d(f, f, 3, 1, 1), nn.PReLU(num_parameters=f)]
        layers.append(nn.Conv2d(f, config.out_channels * config.scale ** 2, 3, 1, 1))
        self.body = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.pixel_shuffle(self.body(x), self.config.scale)
        return out + F.interpolate(x, scale_factor=self.config.scale, mode="nearest")
