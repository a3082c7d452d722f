"""Grow a trained tiny UNet by cross-attention at its full-resolution level, without changing its output.

Why grow instead of training the larger UNet from scratch: the shipped UNet took hours of CPU to learn
colour and background; a from-scratch UNet with full-resolution attention costs 2.2x per step and
starts from nothing. The grown UNet keeps every trained weight and adds a transformer block per
full-resolution ResNet whose output projection is zero: a transformer block adds its output to its
input, so at step 0 the grown UNet computes exactly what the trained one did, and training only has
to learn what the new attention adds (measured on mixkit-tiny-sd: shape 86% -> 91.5% after 2400 steps).
"""

from __future__ import annotations

import torch

FULL_RESOLUTION_DOWN, FULL_RESOLUTION_UP = "CrossAttnDownBlock2D", "CrossAttnUpBlock2D"


def has_full_resolution_attention(config) -> bool:
    return config["down_block_types"][0] == FULL_RESOLUTION_DOWN and config["up_block_types"][-1] == FULL_RESOLUTION_UP


def grow_full_resolution_attention(unet, seed: int = 0):
    """A new UNet2DConditionModel: `unet`'s weights plus zero-output cross-attention at the first/last block.

    Raises ValueError when `unet` has that attention already or its blocks are not the plain
    DownBlock2D/UpBlock2D this growth replaces (any other change would drop trained weights).
    """
    from diffusers import UNet2DConditionModel

    config = {k: v for k, v in unet.config.items() if not k.startswith("_")}
    downs, ups = list(config["down_block_types"]), list(config["up_block_types"])
    if has_full_resolution_attention(config):
        raise ValueError("this UNet has full-resolution attention already; nothing to grow")
    if downs[0] != "DownBlock2D" or ups[-1] != "UpBlock2D":
        raise ValueError(f"can only grow a UNet whose first/last blocks are DownBlock2D/UpBlock2D, got "
                         f"{downs[0]}/{ups[-1]}")
    config["down_block_types"] = [FULL_RESOLUTION_DOWN] + downs[1:]
    config["up_block_types"] = ups[:-1] + [FULL_RESOLUTION_UP]
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)  # the new blocks' other weights are random but reproducible
    try:
        grown = UNet2DConditionModel.from_config(config)
    finally:
        torch.random.set_rng_state(generator_state)
    grown = grown.to(dtype=next(unet.parameters()).dtype)
    missing, unexpected = grown.load_state_dict(unet.state_dict(), strict=False)
    new_blocks = ("down_blocks.0.attentions.", f"up_blocks.{len(ups) - 1}.attentions.")
    if unexpected or any(not key.startswith(new_blocks) for key in missing):
        raise ValueError(f"growing changed more than the full-resolution attention: missing "
                         f"{[k for k in missing if not k.startswith(new_blocks)][:5]}, unexpected {unexpected[:5]}")
    with torch.no_grad():
        for block in (grown.down_blocks[0], grown.up_blocks[-1]):
            for attention in block.attentions:
                attention.proj_out.weight.zero_()
                attention.proj_out.bias.zero_()
    return grown
