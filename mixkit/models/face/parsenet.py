"""facexlib's ParseNet face parser (`parsing_parsenet.pth`, from PSFRGAN), the network A1111's paste-back asks which
pixels of a restored 512×512 face are face (skin, brows, eyes, nose, lips, ears, hair …) and which are background,
neck, cloth or hat.

An encoder of stride-2 residual blocks, a body of residual blocks added back onto its input, a decoder of
nearest-upsampling residual blocks, and two 3×3 heads: 19 CelebAMask-HQ class logits and a reconstructed image. Every
3×3 convolution reflects its border by one pixel first. Module names follow facexlib's so its checkpoint loads as is
(`encoder.1.conv1.conv2d.weight`, `encoder.1.conv1.norm.norm.running_mean`, `encoder.1.shortcut_func.conv2d.bias` …).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

# CelebAMask-HQ in PSFRGAN's order: background, skin, nose, glasses, left/right eye, left/right brow, left/right ear,
# mouth, upper/lower lip, hair, hat, earring, necklace, neck, cloth; A1111's mask keeps a subset (`parse_mask`).
PARSENET_CLASSES = 19


@dataclass(frozen=True)
class ParseNetConfig:
    """ParseNet's shape. `facexlib()` is `ParseNet(in_size=512, out_size=512, parsing_ch=19)`: 512 → 32 in four
    stride-2 steps and back; channels double per step from `base_channels`, clipped to [min, max]."""

    base_channels: int = 64
    min_channels: int = 32
    max_channels: int = 256
    down_steps: int = 4
    up_steps: int = 4
    res_depth: int = 10
    parsing_channels: int = PARSENET_CLASSES

    @classmethod
    def facexlib(cls) -> "ParseNetConfig":
        return cls()

    def clip(self, channels: int) -> int:
        return max(self.min_channels, min(channels, self.max_channels))


class _BatchNormSlot(nn.Module):
    """facexlib's NormLayer: holds the BatchNorm as `.norm`, hence the doubled `norm.norm.*` checkpoint keys."""

    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


class ParseConv(nn.Module):
    """Optional ×2 nearest upsampling, 1-pixel reflection pad, 3×3 conv (stride 2 when `down`), then batch norm and
    LeakyReLU(0.2) when asked (a batch-normed conv has no bias, as in facexlib)."""

    def __init__(self, in_channels: int, out_channels: int, *, scale: str = "none", batch_norm: bool = False,
                 activation: bool = False):
        super().__init__()
        self.upsample = scale == "up"
        self.conv2d = nn.Conv2d(in_channels, out_channels, 3, stride=2 if scale == "down" else 1,
                                bias=not batch_norm)
        self.norm = _BatchNormSlot(out_channels) if batch_norm else nn.Identity()
        self.activation = nn.LeakyReLU(0.2) if activation else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.upsample:
            x = F.interpolate(x, scale_factor=2, mode="nearest")
        x = self.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"))
        return self.activation(self.norm(x))


class ParseResidualBlock(nn.Module):
    """Two ParseConvs plus a shortcut (a plain conv when the size or width changes, else identity). Going down, the
    second conv strides; going up, the first upsamples."""

    def __init__(self, in_channels: int, out_channels: int, scale: str = "none"):
        super().__init__()
        first, second = {"down": ("none", "down"), "up": ("up", "none"), "none": ("none", "none")}[scale]
        self.shortcut_func = (nn.Identity() if scale == "none" and in_channels == out_channels
                              else ParseConv(in_channels, out_channels, scale=scale))
        self.conv1 = ParseConv(in_channels, out_channels, scale=first, batch_norm=True, activation=True)
        self.conv2 = ParseConv(out_channels, out_channels, scale=second, batch_norm=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shortcut_func(x) + self.conv2(self.conv1(x))


class ParseNet(nn.Module):
    """Face parsing network: `forward(x)` on [N, 3, H, W] RGB in [-1, 1] (H, W multiples of 2**down_steps) returns
    (class logits [N, parsing_channels, H, W], reconstructed image [N, 3, H, W]) as facexlib's does."""

    def __init__(self, config: ParseNetConfig | None = None):
        super().__init__()
        self.config = config = config or ParseNetConfig.facexlib()
        width = config.base_channels
        encoder: list[nn.Module] = [ParseConv(3, width)]
        for _ in range(config.down_steps):
            encoder.append(ParseResidualBlock(config.clip(width), config.clip(width * 2), "down"))
            width *= 2
        body = [ParseResidualBlock(config.clip(width), config.clip(width)) for _ in range(config.res_depth)]
        decoder = []
        for _ in range(config.up_steps):
            decoder.append(ParseResidualBlock(config.clip(width), config.clip(width // 2), "up"))
            width //= 2
        self.encoder, self.body, self.decoder = nn.Sequential(*encoder), nn.Sequential(*body), nn.Sequential(*decoder)
        self.out_img_conv = ParseConv(config.clip(width), 3)
        self.out_mask_conv = ParseConv(config.clip(width), config.parsing_channels)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.encoder(x)
        x = self.decoder(features + self.body(features))
        return self.out_mask_conv(x), self.out_img_conv(x)


def _count_blocks(state: dict, prefix: str) -> int:
    indices = {int(match.group(1)) for key in state if (match := re.match(rf"{prefix}\.(\d+)\.", key))}
    return max(indices) + 1 if indices else 0


def parsenet_config_from_state(state: dict[str, torch.Tensor]) -> ParseNetConfig:
    """The ParseNetConfig a facexlib-layout state dict was saved from (depths from block indices, widths from conv
    shapes); KeyError when a key every ParseNet has is missing."""
    widths = [value.shape[0] for key, value in state.items() if key.endswith("conv2d.weight")
              and not key.startswith("out_")]
    return ParseNetConfig(base_channels=state["encoder.0.conv2d.weight"].shape[0], min_channels=min(widths),
                          max_channels=max(widths), down_steps=_count_blocks(state, "encoder") - 1,
                          up_steps=_count_blocks(state, "decoder"), res_depth=_count_blocks(state, "body"),
                          parsing_channels=state["out_mask_conv.conv2d.weight"].shape[0])


def load_parsenet(path: str | os.PathLike, *, device: str | torch.device = "cpu",
                  dtype: torch.dtype = torch.float32) -> ParseNet:
    """facexlib's `parsing_parsenet.pth` (or a file of the same layout) as an eval-mode ParseNet.

    Read weights-only; the depth and widths come from the file, and every tensor must then fit exactly.
    """
    from mixkit.errors import CheckpointFormatError
    from mixkit.io.loading import read_checkpoint
    from mixkit.io.state_fit import check_state_fits

    file = Path(path).expanduser()
    loaded = read_checkpoint(file)
    if isinstance(loaded, dict) and isinstance(loaded.get("params"), dict):  # basicsr-style wrapper
        loaded = loaded["params"]
    if not isinstance(loaded, dict):
        raise CheckpointFormatError(f"{str(file)!r} holds a {type(loaded).__name__}, not ParseNet weights.")
    state = {(key[len("module."):] if key.startswith("module.") else key): value for key, value in loaded.items()
             if isinstance(key, str) and isinstance(value, torch.Tensor)}
    try:
        config = parsenet_config_from_state(state)
    except KeyError as error:
        keys = ", ".join(list(state)[:5]) or "no tensors"
        raise CheckpointFormatError(f"{str(file)!r} is not a ParseNet face parser: it has no {error.args[0]!r} "
                                    f"(its first keys: {keys}); expected facexlib's parsing_parsenet.pth.") from None
    if config.down_steps < 1 or config.down_steps != config.up_steps:
        raise CheckpointFormatError(f"{str(file)!r} has {config.down_steps} encoder and {config.up_steps} decoder "
                                    "steps; a ParseNet that parses at its input size has as many of each (≥ 1).")
    model = ParseNet(config)
    expected = model.state_dict()
    check_state_fits(expected, state, file, "a ParseNet", optional_suffixes=("num_batches_tracked",))
    model.load_state_dict(state, strict=False)
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)
