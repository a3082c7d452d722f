"""A DAT state dict's hyper-parameters, read from its keys, tensor shapes and stored buffers.

In the official `dat_arch.py` names:
- embed_dim / in_channels: `conv_first.weight`; depths: the block indices under each `layers.N.blocks.M`;
- num_heads: the channel blocks' `attn.temperature` (heads, 1, 1), or twice a spatial branch's `pos.pos3.2` outputs
  for a group of one block;
- split_size: the offsets in the first spatial branch's `rpe_biases` buffer (rows (dy, dx) for dy in
  1-h .. h-1, dx in 1-w .. w-1), which every released file stores;
- expansion_factor: `ffn.fc1.weight` rows / embed_dim; qkv_bias: whether `attn.qkv.bias` exists;
- resi_connection, upsampler, scale and num_feat: as SwinIR (`swinir_layout.reconstruction_head`).
The stored `rpe_biases`, `relative_position_index` and `attn_mask_0/1` buffers are dropped after reading: they
follow from split_size and the input size.
"""

from __future__ import annotations

import re

import torch

from mixkit.models.upscalers.dat import DATConfig
from mixkit.models.upscalers.swinir_layout import TransformerLayoutError, block_depths, reconstruction_head, sized

_BLOCK = re.compile(r"^layers\.(\d+)\.blocks\.(\d+)\.")
_DERIVED_BUFFERS = re.compile(r"\.(rpe_biases|relative_position_index|attn_mask_0|attn_mask_1)$")


def looks_like_dat(state: dict[str, torch.Tensor]) -> bool:
    return "conv_first.weight" in state and "before_RG.1.weight" in state and any(_BLOCK.match(key) for key in state)


def dat_to_module(state: dict[str, torch.Tensor]) -> tuple[DATConfig, dict[str, torch.Tensor]]:
    """(config, weights for `DAT`) of an official-layout state dict; raises TransformerLayoutError naming what is off."""
    first = sized(state, "conv_first.weight", 4, "DAT")
    embed_dim, in_channels = first.shape[0], first.shape[1]
    depths = block_depths(state, _BLOCK, "DAT")
    num_heads = tuple(_heads(state, index) for index in range(len(depths)))
    offsets_key = "layers.0.blocks.0.attn.attns.0.rpe_biases"
    if offsets_key not in state:
        raise TransformerLayoutError(f"a DAT file without its {offsets_key!r} buffer, which holds the window size; "
                                "re-save it with the official network's state_dict()")
    offsets = sized(state, offsets_key, 2, "DAT")
    if (offsets.shape[1] != 2 or offsets.dtype == torch.bool or offsets.is_complex()
            or not torch.isfinite(offsets).all()):
        raise TransformerLayoutError(f"a DAT whose {offsets_key!r} buffer is not finite (dy, dx) offset rows: shape "
                                     f"{tuple(offsets.shape)}")
    # the window sides must fit an int before DATConfig bounds them; a crafted 1e30 would otherwise overflow
    highest = offsets.double().amax(0).clamp(-1, 1 << 20)
    split_size = (int(highest[0]) + 1, int(highest[1]) + 1)
    fc1 = sized(state, "layers.0.blocks.0.ffn.fc1.weight", 2, "DAT")
    weights = {key: value for key, value in state.items() if not _DERIVED_BUFFERS.search(key)}
    upsampler, upscale, num_feat, out_channels = reconstruction_head(weights, embed_dim, "DAT")
    if in_channels != 3 or out_channels != 3:
        raise TransformerLayoutError(f"a DAT of {in_channels} input / {out_channels} output channels; only RGB models "
                                "upscale images")
    try:
        config = DATConfig(
            embed_dim=embed_dim, depths=depths, num_heads=num_heads, split_size=split_size,
            expansion_factor=fc1.shape[0] / embed_dim, qkv_bias="layers.0.blocks.0.attn.qkv.bias" in weights,
            upsampler=upsampler, upscale=upscale,
            resi_connection="3conv" if "conv_after_body.4.weight" in weights else "1conv", num_feat=num_feat)
    except ValueError as error:
        raise TransformerLayoutError(f"a DAT whose shapes do not make a network: {error}") from None
    return config, weights


def _heads(state: dict[str, torch.Tensor], group: int) -> int:
    key = f"layers.{group}.blocks.1.attn.temperature"
    if key in state:
        return sized(state, key, 3, "DAT").shape[0]
    return 2 * sized(state, f"layers.{group}.blocks.0.attn.attns.0.pos.pos3.2.weight", 2, "DAT").shape[0]

