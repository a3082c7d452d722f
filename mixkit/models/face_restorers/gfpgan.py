"""GFPGAN (Wang et al. 2021, "Towards Real-World Blind Face Restoration with Generative Facial Prior"), the "clean"
architecture of GFPGANv1.3 / v1.4 (`GFPGANv1Clean`): a U-Net encoder that predicts StyleGAN2 latents plus a scale
and shift map per resolution, and a StyleGAN2 decoder (`stylegan2`) modulated by them.

Module and parameter names are the official `gfpganv1_clean_arch.py`'s (`conv_body_first`, `conv_body_down.N`,
`final_conv`, `final_linear`, `conv_body_up.N`, `toRGB.N`, `condition_scale.N`, `condition_shift.N`,
`stylegan_decoder.*`). Widths are stored per resolution rather than as the original's `narrow` and
`channel_multiplier`, so any file's widths (read by `layouts`) build exactly; `GFPGANConfig.official` gives the
original's formula.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from mixkit.models.face_restorers.faces import check_faces, check_fidelity, restore_at_size
from mixkit.models.face_restorers.stylegan2 import StyleGAN2SFTDecoder

_BASE_WIDTHS = {4: 512, 8: 512, 16: 512, 32: 512, 64: 256, 128: 128, 256: 64, 512: 32, 1024: 16}


@dataclass(frozen=True)
class GFPGANConfig:
    """Sizes of a GFPGANv1Clean network; the defaults are GFPGANv1.3 / v1.4's (512 px, narrow 1, multiplier 2).

    `decoder_channels[i]` / `unet_channels[i]` are the StyleGAN2 decoder's / U-Net's widths at resolution 4 * 2**i,
    up to `out_size`.
    """

    out_size: int = 512
    style_dim: int = 512
    mlp_layers: int = 8
    decoder_channels: tuple[int, ...] = (512, 512, 512, 512, 512, 256, 128, 64)
    unet_channels: tuple[int, ...] = (256, 256, 256, 256, 256, 128, 64, 32)
    different_w: bool = True  # one latent per decoder layer (every released file) instead of one shared
    sft_half: bool = True  # SFT on half of the decoder's channels (every released file)

    def __post_init__(self) -> None:
        levels = self.out_size.bit_length() - 3
        if self.out_size < 8 or self.out_size & (self.out_size - 1):
            raise ValueError(f"GFPGAN out_size must be a power of two >= 8, got {self.out_size}.")
        if len(self.decoder_channels) != levels + 1 or len(self.unet_channels) != levels + 1:
            raise ValueError(f"GFPGAN at {self.out_size} px needs {levels + 1} widths (4 px to {self.out_size} px); "
                             f"got decoder {self.decoder_channels}, U-Net {self.unet_channels}.")
        if min(self.decoder_channels + self.unet_channels + (self.style_dim, self.mlp_layers + 1)) < 1:
            raise ValueError(f"GFPGAN widths, style_dim and mlp_layers must be positive: {self}.")
        if any(2 * unet != decoder for unet, decoder in zip(self.unet_channels[1:], self.decoder_channels[1:])):
            raise ValueError(f"GFPGAN's SFT maps need decoder widths twice the U-Net's from 8 px up; got decoder "
                             f"{self.decoder_channels}, U-Net {self.unet_channels}.")

    @classmethod
    def official(cls, out_size: int = 512, channel_multiplier: int = 2, narrow: float = 1.0, **sizes) -> "GFPGANConfig":
        """The widths GFPGANv1Clean derives from `channel_multiplier` and `narrow` (the U-Net uses half of them)."""
        if out_size not in _BASE_WIDTHS or out_size < 8:
            raise ValueError(f"GFPGANv1Clean's width formula covers out_size 8 to 1024 (powers of two), got {out_size}.")
        resolutions = [4 * 2 ** level for level in range(out_size.bit_length() - 2)]

        def width(resolution: int, factor: float) -> int:
            multiplier = channel_multiplier if resolution >= 64 else 1
            return int(_BASE_WIDTHS[resolution] * multiplier * factor)

        return cls(out_size=out_size, decoder_channels=tuple(width(r, narrow) for r in resolutions),
                   unet_channels=tuple(width(r, narrow * 0.5) for r in resolutions), **sizes)

    @property
    def latent_count(self) -> int:
        return 2 * (self.out_size.bit_length() - 1) - 2


class ResampleBlock(nn.Module):
    """GFPGAN's U-Net residual block: conv, bilinear x2 / x0.5, conv, plus a resampled 1x1 projection of the input."""

    def __init__(self, in_channels: int, out_channels: int, scale: float):
        super().__init__()
        self.scale = scale
        self.conv1 = nn.Conv2d(in_channels, in_channels, 3, padding=1)
        self.conv2 = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.skip = nn.Conv2d(in_channels, out_channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.leaky_relu(self.conv1(x), 0.2)
        out = F.interpolate(out, scale_factor=self.scale, mode="bilinear", align_corners=False)
        out = F.leaky_relu(self.conv2(out), 0.2)
        return out + self.skip(F.interpolate(x, scale_factor=self.scale, mode="bilinear", align_corners=False))


def _sft_branch(channels: int, out_channels: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.LeakyReLU(0.2),
                         nn.Conv2d(channels, out_channels, 3, padding=1))


class GFPGAN(nn.Module):
    """GFPGANv1Clean at inference: aligned faces [N, 3, S, S] in [-1, 1] -> restored faces, same shape and range.

    Faces of another size than the network's `out_size` are resized to it and back (bilinear, antialiased).
    The decoder's noise is random per call, as GFPGANer's and A1111's inference (`randomize_noise=True`); pass
    `randomize_noise=False` for the fixed noise maps stored in the file (deterministic output).
    """

    arch_name = "GFPGAN"

    def __init__(self, config: GFPGANConfig):
        super().__init__()
        self.config = config
        unet, decoder = config.unet_channels, config.decoder_channels
        self.conv_body_first = nn.Conv2d(3, unet[-1], 1)
        self.conv_body_down = nn.ModuleList(ResampleBlock(unet[level], unet[level - 1], 0.5)
                                            for level in range(len(unet) - 1, 0, -1))
        self.final_conv = nn.Conv2d(unet[0], unet[0], 3, padding=1)
        self.conv_body_up = nn.ModuleList(ResampleBlock(unet[level - 1], unet[level], 2.0)
                                          for level in range(1, len(unet)))
        self.toRGB = nn.ModuleList(nn.Conv2d(width, 3, 1) for width in unet[1:])  # the training loss's; unused here
        latents = config.latent_count if config.different_w else 1
        self.final_linear = nn.Linear(unet[0] * 16, latents * config.style_dim)
        self.stylegan_decoder = StyleGAN2SFTDecoder(decoder, config.style_dim, config.mlp_layers, config.sft_half)
        sft_factor = 1 if config.sft_half else 2
        self.condition_scale = nn.ModuleList(_sft_branch(width, width * sft_factor) for width in unet[1:])
        self.condition_shift = nn.ModuleList(_sft_branch(width, width * sft_factor) for width in unet[1:])

    def forward(self, x: torch.Tensor, weight: float | None = None, *, randomize_noise: bool = True) -> torch.Tensor:
        """Restore `x`; `weight` (CodeFormer's fidelity) is accepted, checked and ignored, so callers need no branch."""
        check_faces(x, self)
        check_fidelity(weight)
        if not isinstance(randomize_noise, bool):
            raise TypeError(f"randomize_noise must be True or False, got {randomize_noise!r}.")
        with torch.no_grad():
            return restore_at_size(x, self.config.out_size, lambda faces: self._restore(faces, randomize_noise))

    def _restore(self, x: torch.Tensor, randomize_noise: bool) -> torch.Tensor:
        feat = F.leaky_relu(self.conv_body_first(x), 0.2)
        skips = []
        for block in self.conv_body_down:
            feat = block(feat)
            skips.insert(0, feat)
        feat = F.leaky_relu(self.final_conv(feat), 0.2)
        latents = self.final_linear(feat.flatten(1)).view(x.shape[0], -1, self.config.style_dim)
        if not self.config.different_w:
            latents = latents.expand(-1, self.config.latent_count, -1)
        conditions = []
        for skip, up, scale, shift in zip(skips, self.conv_body_up, self.condition_scale, self.condition_shift):
            feat = up(feat + skip)
            conditions += [scale(feat), shift(feat)]
        return self.stylegan_decoder(latents, conditions, randomize_noise)
