"""The frame SwinIR, HAT and DAT share around their transformer bodies.

The three official networks repeat it in each file: the dataset mean is subtracted and a 3x3 convolution makes
features (`conv_first`); after the body, a LayerNorm (`norm`), a convolution (`conv_after_body`) and a skip from
the first features; then a reconstruction head (`reconstruction_modules`). Only the body differs, so a network
subclasses `TransformerUpscaler`, builds its body between `__init__` and `add_body_end` (parameters are created in
the originals' order, so a seeded tiny model gets the same weights as before), and defines `deep_features`.
SwinIR and HAT share their body's frame as well (`SwinTransformerUpscaler`).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from mixkit.models.upscalers.windows import shift_mask

RGB_MEAN = (0.4488, 0.4371, 0.4040)  # DIV2K's mean, subtracted by every released RGB SwinIR, HAT and DAT


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
    """The convolution closing a residual group: one 3x3, '3conv' (3x3 to dim/4, 1x1, 3x3 back) to save weights,
    or HAT's 'identity' (none)."""
    if resi_connection == "1conv":
        return nn.Conv2d(dim, dim, 3, 1, 1)
    if resi_connection == "identity":
        return nn.Identity()
    quarter = dim // 4
    return nn.Sequential(nn.Conv2d(dim, quarter, 3, 1, 1), nn.LeakyReLU(0.2), nn.Conv2d(quarter, quarter, 1, 1, 0),
                         nn.LeakyReLU(0.2), nn.Conv2d(quarter, dim, 3, 1, 1))


class TransformerUpscaler(nn.Module):
    """RGB in [0, 1] -> RGB in [0, 1] at `config.scale` times the size; a subclass adds the body."""

    def __init__(self, config) -> None:
        super().__init__()
        self.config = config
        self.scale = config.scale
        mean = RGB_MEAN if config.in_channels == 3 else (0.0,) * config.in_channels
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1), persistent=False)
        self.conv_first = nn.Conv2d(config.in_channels, config.embed_dim, 3, 1, 1)

    def add_body_end(self) -> None:
        """The modules after the body, added once the subclass has built its layers (the originals' order)."""
        dim = self.config.embed_dim
        self.norm = nn.LayerNorm(dim)
        self.conv_after_body = conv_block(dim, self.config.resi_connection)
        for name, module in reconstruction_modules(self.config, dim).items():
            setattr(self, name, module)

    def deep_features(self, x: torch.Tensor) -> torch.Tensor:
        """The body on (B, C, H, W) features -> normalised (B, C, H, W) features."""
        raise NotImplementedError

    def forward_whole_windows(self, x: torch.Tensor) -> torch.Tensor:
        """The network itself, on an input its body takes as is: whole windows for SwinIR and HAT, any size for DAT
        (the official module's forward)."""
        x = (x - self.mean.to(x.dtype)) * self.config.img_range
        first = self.conv_first(x)
        features = self.conv_after_body(self.deep_features(first)) + first
        out = reconstruct(self, features, x)
        return out / self.config.img_range + self.mean.to(out.dtype)


class SwinTransformerUpscaler(TransformerUpscaler):
    """The body frame of SwinIR and HAT: an optional patch LayerNorm, then residual groups on (B, H, W, C) tokens
    that take the shifted windows' mask."""

    def __init__(self, config, residual_group: Callable[[int, int], nn.Module]) -> None:
        """`residual_group(depth, num_heads)` makes one of the body's groups."""
        super().__init__(config)
        if config.patch_norm:
            self.patch_embed = nn.Module()  # the original's PatchEmbed, kept for its key names
            self.patch_embed.norm = nn.LayerNorm(config.embed_dim)
        self.layers = nn.ModuleList(residual_group(depth, heads)
                                    for depth, heads in zip(config.depths, config.num_heads))
        self.add_body_end()

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
