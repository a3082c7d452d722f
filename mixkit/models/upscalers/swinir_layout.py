"""A SwinIR state dict's hyper-parameters, read from its keys and tensor shapes (no config file is ever shipped).

What each comes from, in the official `network_swinir.py` names:
- embed_dim / in_channels: `conv_first.weight` (embed_dim, in_chans, 3, 3);
- depths: the block indices under each `layers.N.residual_group.blocks.M`;
- num_heads: the columns of each layer's `relative_position_bias_table` ((2 * window - 1) ** 2, heads), whose rows
  give window_size;
- mlp_ratio: `mlp.fc1.weight` rows / embed_dim; qkv_bias, patch_norm: whether `attn.qkv.bias` and
  `patch_embed.norm.weight` exist;
- resi_connection: `conv_after_body.weight` (1conv) or `conv_after_body.0/2/4` (3conv);
- num_feat: `conv_last`'s inputs in the pixelshuffle and nearest+conv heads (the others have no such layer);
- upsampler and scale: `conv_up1` (+ `conv_up2` for x4) is nearest+conv (Real-SwinIR), `conv_before_upsample` with
  `upsample.K` convs is pixelshuffle (2 ** convs, or 3 from a 9x-wide conv), a lone `upsample.0` conv is
  pixelshuffledirect (its outputs are scale ** 2 x 3), only `conv_last` from embed_dim features is a same-size model.
img_range is not stored; the released models all use 1.0. The `attn_mask` and `relative_position_index` buffers the
original writes into its files are dropped: they follow from the window size and the input size.
"""

from __future__ import annotations

import math
import re

import torch

from mixkit.models.upscalers.swinir import SwinIRConfig

_BLOCK = re.compile(r"^layers\.(\d+)\.residual_group\.blocks\.(\d+)\.")
_DERIVED_BUFFERS = re.compile(r"\.(attn_mask|attn\.relative_position_index)$")
# keys only the unsupported SwinIR relatives have: Swin2SR's (SwinV2) cosine attention (HAT is told apart before
# SwinIR by `hat_layout.looks_like_hat`)
_RELATIVES = {"logit_scale": "Swin2SR", "cpb_mlp": "Swin2SR"}


class TransformerLayoutError(ValueError):
    """A SwinIR- or DAT-like file that cannot be run, saying why; `layouts` turns it into UnknownLayoutError."""


def looks_like_swinir(state: dict[str, torch.Tensor]) -> bool:
    return "conv_first.weight" in state and any(_BLOCK.match(key) for key in state)


def swinir_to_module(state: dict[str, torch.Tensor]) -> tuple[SwinIRConfig, dict[str, torch.Tensor]]:
    """(config, weights for `SwinIR`) of an official-layout state dict; raises TransformerLayoutError naming what is off."""
    for key in state:
        for marker, name in _RELATIVES.items():
            if f".{marker}." in f".{key}.":
                raise TransformerLayoutError(f"a {name} network (key {key!r}), which is not supported; supported SwinIR "
                                        "files have the official network_swinir.py keys")
    if "absolute_pos_embed" in state:
        raise TransformerLayoutError("a SwinIR with an absolute position embedding (ape=True), which only runs at its "
                                "training size; no released model uses it")
    weights = {key: value for key, value in state.items() if not _DERIVED_BUFFERS.search(key)}
    first = sized(weights, "conv_first.weight", 4)
    embed_dim, in_channels = first.shape[0], first.shape[1]
    depths = block_depths(weights, _BLOCK, "SwinIR")
    tables = [sized(weights, f"layers.{index}.residual_group.blocks.0.attn.relative_position_bias_table", 2)
              for index in range(len(depths))]
    num_heads = tuple(table.shape[1] for table in tables)
    window_size = _window_size(tables[0].shape[0])
    fc1 = sized(weights, "layers.0.residual_group.blocks.0.mlp.fc1.weight", 2)
    upsampler, upscale, num_feat, out_channels = reconstruction_head(weights, embed_dim)
    try:
        config = SwinIRConfig(
            in_channels=in_channels, out_channels=out_channels, embed_dim=embed_dim, depths=depths, num_heads=num_heads,
            window_size=window_size, mlp_ratio=fc1.shape[0] / embed_dim,
            qkv_bias="layers.0.residual_group.blocks.0.attn.qkv.bias" in weights,
            patch_norm="patch_embed.norm.weight" in weights, upsampler=upsampler, upscale=upscale,
            resi_connection="3conv" if "conv_after_body.4.weight" in weights else "1conv", num_feat=num_feat)
    except ValueError as error:
        raise TransformerLayoutError(f"a SwinIR whose shapes do not make a network: {error}") from None
    if any(table.shape[0] != tables[0].shape[0] for table in tables):
        raise TransformerLayoutError("a SwinIR whose layers have different window sizes")
    if in_channels != 3 or out_channels != 3:
        raise TransformerLayoutError(f"a SwinIR of {in_channels} input / {out_channels} output channels (grayscale "
                                "denoising); only RGB models upscale images")
    return config, weights


def _required(weights: dict[str, torch.Tensor], key: str, network: str = "SwinIR") -> torch.Tensor:
    if key not in weights:
        raise TransformerLayoutError(f"a {network}-like file without {key!r}")
    return weights[key]


def sized(weights: dict[str, torch.Tensor], key: str, ndim: int, network: str = "SwinIR") -> torch.Tensor:
    """weights[key], which a size is read from, checked to have `ndim` non-empty dimensions (a crafted or broken
    file must be refused saying which key is off, not fail deep inside with an IndexError or a division by zero)."""
    value = _required(weights, key, network)
    if value.ndim != ndim or 0 in value.shape:
        raise TransformerLayoutError(f"a {network}-like file whose {key!r} has shape {tuple(value.shape)}; expected "
                                     f"{ndim} non-empty dimensions")
    return value


def block_depths(weights: dict[str, torch.Tensor], pattern: re.Pattern, network: str) -> tuple[int, ...]:
    """Blocks per layer, counted from the keys `pattern` matches (groups: layer number, block number); a file whose
    layers or blocks are not numbered 0, 1, 2 ... (a gap, or none at all) is refused, naming the numbers found."""
    blocks: dict[int, set[int]] = {}
    for key in weights:
        match = pattern.match(key)
        if match:
            blocks.setdefault(int(match.group(1)), set()).add(int(match.group(2)))
    if not blocks or sorted(blocks) != list(range(len(blocks))) or \
            any(sorted(b) != list(range(len(b))) for b in blocks.values()):
        raise TransformerLayoutError(f"a {network} whose layers/blocks are not numbered 0, 1, 2 ...: {sorted(blocks)}")
    return tuple(len(blocks[index]) for index in range(len(blocks)))


def _window_size(rows: int) -> int:
    span = math.isqrt(rows)
    if span * span != rows or span % 2 == 0:
        raise TransformerLayoutError(f"a SwinIR whose relative position bias table has {rows} rows, not (2 * window - 1) ** 2")
    return (span + 1) // 2


def reconstruction_head(weights: dict[str, torch.Tensor], embed_dim: int,
                        network: str = "SwinIR") -> tuple[str, int, int, int]:
    """(upsampler, scale, num_feat, output channels) from the reconstruction head's convolutions (SwinIR's, which
    DAT shares); `network` names the file's kind in errors."""
    if "conv_up1.weight" in weights:
        last = sized(weights, "conv_last.weight", 4, network)
        return "nearest+conv", 4 if "conv_up2.weight" in weights else 2, last.shape[1], last.shape[0]
    ups = sorted(int(key.split(".")[1]) for key in weights if re.fullmatch(r"upsample\.\d+\.weight", key))
    if "conv_before_upsample.0.weight" in weights:
        if not ups:
            raise TransformerLayoutError(f"a pixelshuffle {network} without upsample convolutions")
        last = sized(weights, "conv_last.weight", 4, network)
        width = sized(weights, f"upsample.{ups[0]}.weight", 4, network).shape[0] // last.shape[1]
        if width == 9 and len(ups) == 1:
            return "pixelshuffle", 3, last.shape[1], last.shape[0]
        if width != 4:
            raise TransformerLayoutError(f"a {network} whose upsample convolutions widen {width}x, not 4x (x2 steps) or 9x (x3)")
        return "pixelshuffle", 2 ** len(ups), last.shape[1], last.shape[0]
    if ups:
        outputs = sized(weights, "upsample.0.weight", 4, network).shape[0]
        for channels in (3, 1):
            scale = math.isqrt(outputs // channels)
            if scale * scale * channels == outputs:
                return "pixelshuffledirect", scale, SwinIRConfig.num_feat, channels
        raise TransformerLayoutError(f"a {network} whose upsample.0 has {outputs} outputs, not channels x a square scale")
    last = sized(weights, "conv_last.weight", 4, network)
    if last.shape[1] != embed_dim:
        raise TransformerLayoutError(f"a {network} whose conv_last takes {last.shape[1]} channels; without an upsampler it takes embed_dim "
                                f"{embed_dim}")
    return "", 1, SwinIRConfig.num_feat, last.shape[0]
