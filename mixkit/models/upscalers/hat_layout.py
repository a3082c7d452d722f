"""A HAT state dict's hyper-parameters, read from its keys and tensor shapes (HAT files ship without a config).

In the official `hat_arch.py` names:
- embed_dim / in_channels: `conv_first.weight`; depths: the block indices under each `layers.N.residual_group.blocks.M`;
- num_heads and window_size: each layer's `blocks.0.attn.relative_position_bias_table` ((2 * window - 1) ** 2, heads);
- overlap_window_size: the rows of `overlap_attn.relative_position_bias_table`, (window + overlap - 1) ** 2;
- cab_channels / squeeze_channels (embed_dim // compress_ratio, // squeeze_factor): the outputs of
  `conv_block.cab.0` and `conv_block.cab.3.attention.1`;
- mlp_ratio: `mlp.fc1.weight` rows / embed_dim; qkv_bias, patch_norm: whether `attn.qkv.bias`, `patch_embed.norm.weight`
  exist; resi_connection: `conv_after_body.weight` (1conv) or none (identity);
- upscale and num_feat: the pixelshuffle head, as SwinIR's (`swinir_layout.reconstruction_head`).
conv_scale (0.01) and img_range (1.0) are not stored; every released model uses those. The stored
`relative_position_index_SA` / `_OCA` buffers are dropped: they follow from the window sizes.
"""

from __future__ import annotations

import math
import re

import torch

from mixkit.models.upscalers.hat import HATConfig
from mixkit.models.upscalers.swinir_layout import TransformerLayoutError, block_depths, reconstruction_head, sized

_BLOCK = re.compile(r"^layers\.(\d+)\.residual_group\.blocks\.(\d+)\.")
_HAT_ONLY = re.compile(r"^layers\.\d+\.residual_group\.(overlap_attn|blocks\.\d+\.conv_block)\.")
_DERIVED_BUFFERS = ("relative_position_index_SA", "relative_position_index_OCA")


def looks_like_hat(state: dict[str, torch.Tensor]) -> bool:
    return "conv_first.weight" in state and any(_HAT_ONLY.match(key) for key in state)


def hat_to_module(state: dict[str, torch.Tensor]) -> tuple[HATConfig, dict[str, torch.Tensor]]:
    """(config, weights for `HAT`) of an official-layout state dict; raises TransformerLayoutError naming what is
    off."""
    if "absolute_pos_embed" in state:
        raise TransformerLayoutError("a HAT with an absolute position embedding (ape=True), which only runs at its "
                                     "training size; no released model uses it")
    weights = {key: value for key, value in state.items() if key not in _DERIVED_BUFFERS}
    first = sized(weights, "conv_first.weight", 4, "HAT")
    embed_dim, in_channels = first.shape[0], first.shape[1]
    depths = block_depths(weights, _BLOCK, "HAT")
    tables = [sized(weights, f"layers.{index}.residual_group.blocks.0.attn.relative_position_bias_table", 2, "HAT")
              for index in range(len(depths))]
    if any(table.shape[0] != tables[0].shape[0] for table in tables):
        raise TransformerLayoutError("a HAT whose layers have different window sizes")
    span = _side(tables[0].shape[0], "relative_position_bias_table", "(2 * window - 1) ** 2")
    if span % 2 == 0:
        raise TransformerLayoutError(f"a HAT whose relative_position_bias_table has {span ** 2} rows, not "
                                     "(2 * window - 1) ** 2")
    window_size = (span + 1) // 2
    overlap_table = sized(weights, "layers.0.residual_group.overlap_attn.relative_position_bias_table", 2, "HAT")
    overlap_window_size = _side(overlap_table.shape[0], "overlap_attn.relative_position_bias_table",
                                "(window + overlap - 1) ** 2") + 1 - window_size
    prefix = "layers.0.residual_group.blocks.0."
    cab = sized(weights, prefix + "conv_block.cab.0.weight", 4, "HAT")
    squeeze = sized(weights, prefix + "conv_block.cab.3.attention.1.weight", 4, "HAT")
    fc1 = sized(weights, prefix + "mlp.fc1.weight", 2, "HAT")
    upsampler, upscale, num_feat, out_channels = reconstruction_head(weights, embed_dim, "HAT")
    if upsampler != "pixelshuffle":
        raise TransformerLayoutError(f"a HAT whose reconstruction head is {upsampler or 'none'!r}; the official "
                                     "network only has the pixelshuffle head (conv_before_upsample, upsample.N)")
    if in_channels != 3 or out_channels != 3:
        raise TransformerLayoutError(f"a HAT of {in_channels} input / {out_channels} output channels; only RGB models "
                                     "upscale images")
    try:
        config = HATConfig(
            in_channels=in_channels, out_channels=out_channels, embed_dim=embed_dim, depths=depths,
            num_heads=tuple(table.shape[1] for table in tables), window_size=window_size,
            overlap_window_size=overlap_window_size, cab_channels=cab.shape[0], squeeze_channels=squeeze.shape[0],
            mlp_ratio=fc1.shape[0] / embed_dim, qkv_bias=prefix + "attn.qkv.bias" in weights,
            patch_norm="patch_embed.norm.weight" in weights, upsampler=upsampler, upscale=upscale,
            resi_connection="1conv" if "conv_after_body.weight" in weights else "identity", num_feat=num_feat)
    except ValueError as error:
        raise TransformerLayoutError(f"a HAT whose shapes do not make a network: {error}") from None
    return config, weights


def _side(rows: int, key: str, formula: str) -> int:
    side = math.isqrt(rows)
    if side * side != rows:
        raise TransformerLayoutError(f"a HAT whose {key} has {rows} rows, not {formula}")
    return side
