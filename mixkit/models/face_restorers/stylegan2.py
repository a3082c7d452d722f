"""The StyleGAN2 generator GFPGAN decodes with (Karras et al. 2020), in its "clean" form: bilinear resampling and
plain convolutions instead of the original's blur kernels and compiled CUDA ops, with GFPGAN's spatial feature
transform (SFT) applied after the first convolution of each resolution.

Module and parameter names are those of GFPGAN's `stylegan2_clean_arch.py` (`constant_input.weight`,
`style_convs.N.modulated_conv.modulation.weight`, `to_rgbs.N.bias`, `noises.noiseN` ...), so the decoder half of
GFPGANv1.3 / v1.4 files loads key for key.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

SQRT2 = math.sqrt(2.0)  # StyleConv's gain, restoring the variance the leaky ReLU halves


class ModulatedConv2d(nn.Module):
    """A convolution whose input channels are scaled per sample by the style, then (optionally) demodulated so each
    output channel has unit expected variance.

    Scaling the input instead of building one weight per sample (the original's grouped convolution) is the same
    linear map and runs as one ordinary convolution for the whole batch.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, style_dim: int, *, demodulate: bool,
                 upsample: bool = False, eps: float = 1e-8):
        super().__init__()
        self.demodulate, self.upsample, self.eps = demodulate, upsample, eps
        self.modulation = nn.Linear(style_dim, in_channels)
        self.weight = nn.Parameter(torch.randn(1, out_channels, in_channels, kernel_size, kernel_size)
                                   / math.sqrt(in_channels * kernel_size ** 2))

    def forward(self, x: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
        scales = self.modulation(style)  # [B, C_in]
        weight = self.weight[0]
        if self.upsample:
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        out = F.conv2d(x * scales[:, :, None, None], weight, padding=weight.shape[-1] // 2)
        if self.demodulate:
            # sum over (C_in, k, k) of (weight * scale)^2 = (sum over k, k of weight^2) @ scale^2
            energy = scales.square() @ weight.square().sum(dim=(2, 3)).t()  # [B, C_out]
            out = out * torch.rsqrt(energy + self.eps)[:, :, None, None]
        return out


class StyleConv(nn.Module):
    """Modulated 3x3 convolution, per-pixel noise scaled by a learned strength, bias, leaky ReLU."""

    def __init__(self, in_channels: int, out_channels: int, style_dim: int, *, upsample: bool = False):
        super().__init__()
        self.modulated_conv = ModulatedConv2d(in_channels, out_channels, 3, style_dim, demodulate=True,
                                              upsample=upsample)
        self.weight = nn.Parameter(torch.zeros(1))  # the noise strength
        self.bias = nn.Parameter(torch.zeros(1, out_channels, 1, 1))

    def forward(self, x: torch.Tensor, style: torch.Tensor, noise: torch.Tensor | None) -> torch.Tensor:
        out = self.modulated_conv(x, style) * SQRT2
        if noise is None:
            noise = torch.randn(out.shape[0], 1, *out.shape[2:], device=out.device, dtype=out.dtype)
        return F.leaky_relu(out + self.weight * noise + self.bias, 0.2)


class ToRGB(nn.Module):
    """1x1 modulated convolution to RGB (not demodulated), added to the upsampled image of the previous level."""

    def __init__(self, in_channels: int, style_dim: int):
        super().__init__()
        self.modulated_conv = ModulatedConv2d(in_channels, 3, 1, style_dim, demodulate=False)
        self.bias = nn.Parameter(torch.zeros(1, 3, 1, 1))

    def forward(self, x: torch.Tensor, style: torch.Tensor, skip: torch.Tensor | None) -> torch.Tensor:
        out = self.modulated_conv(x, style) + self.bias
        if skip is not None:
            out = out + F.interpolate(skip, scale_factor=2, mode="bilinear", align_corners=False)
        return out


class ConstantInput(nn.Module):
    """The learned 4x4 feature map the generator starts from."""

    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(1, channels, 4, 4))


class StyleGAN2SFTDecoder(nn.Module):
    """StyleGAN2's synthesis network with SFT conditions: after the first (upsampling) convolution of each level from
    8x8 up, `out = out * scale + shift` with the encoder's per-level scale and shift maps (on the second half of the
    channels when `sft_half`, as in every released GFPGAN).

    `channels[i]` is the width at resolution 4 * 2**i. The style MLP is kept for the files' keys; GFPGAN feeds
    latents directly (`input_is_latent=True` in GFPGANer and A1111), so `forward` does not run it.
    """

    def __init__(self, channels: tuple[int, ...], style_dim: int, mlp_layers: int, sft_half: bool):
        super().__init__()
        self.sft_half = sft_half
        mlp: list[nn.Module] = [nn.Identity()]  # index 0 is the original's parameter-free style-code normaliser
        for _ in range(mlp_layers):
            mlp += [nn.Linear(style_dim, style_dim), nn.LeakyReLU(0.2)]
        self.style_mlp = nn.Sequential(*mlp)
        self.constant_input = ConstantInput(channels[0])
        self.style_conv1 = StyleConv(channels[0], channels[0], style_dim)
        self.to_rgb1 = ToRGB(channels[0], style_dim)
        self.style_convs = nn.ModuleList()
        self.to_rgbs = nn.ModuleList()
        for previous, width in zip(channels, channels[1:]):
            self.style_convs.append(StyleConv(previous, width, style_dim, upsample=True))
            self.style_convs.append(StyleConv(width, width, style_dim))
            self.to_rgbs.append(ToRGB(width, style_dim))
        # the fixed noise maps the files store (one per StyleConv), used when noise is not randomised
        self.noises = nn.Module()
        for index in range(2 * len(channels) - 1):
            side = 2 ** ((index + 5) // 2)
            self.noises.register_buffer(f"noise{index}", torch.randn(1, 1, side, side))

    @property
    def latent_count(self) -> int:
        """How many style vectors one image uses: two per level from 8x8 (conv, conv), one for each RGB head."""
        return 2 * (len(self.to_rgbs) + 2) - 2

    def forward(self, latents: torch.Tensor, conditions: list[torch.Tensor], randomize_noise: bool) -> torch.Tensor:
        """The RGB image from `latents` [B, latent_count, style_dim] and a (scale, shift) pair per level."""
        noises = [None] * (2 * len(self.to_rgbs) + 1) if randomize_noise else \
            [getattr(self.noises, f"noise{index}") for index in range(2 * len(self.to_rgbs) + 1)]
        out = self.constant_input.weight.expand(latents.shape[0], -1, -1, -1)
        out = self.style_conv1(out, latents[:, 0], noises[0])
        image = self.to_rgb1(out, latents[:, 1], None)
        for level, to_rgb in enumerate(self.to_rgbs):
            first = 2 * level + 1
            out = self.style_convs[2 * level](out, latents[:, first], noises[first])
            scale, shift = conditions[2 * level], conditions[2 * level + 1]
            if self.sft_half:
                kept, modulated = out.split(out.shape[1] // 2, dim=1)
                out = torch.cat([kept, modulated * scale + shift], dim=1)
            else:
                out = out * scale + shift
            out = self.style_convs[2 * level + 1](out, latents[:, first + 1], noises[first + 1])
            image = to_rgb(out, latents[:, first + 2], image)
        return image
