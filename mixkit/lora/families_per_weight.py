"""The LoRA families stored whole or per channel / block of the weight: IA3, full (diff), norm and OFT."""

from __future__ import annotations

import torch

from mixkit.lora import deltas
from mixkit.lora.algorithm_family import AlgorithmFamily, flat_in, float_tensor


# IA3: a learned per-channel rescale of the weight (output channels, or input ones when `on_input`).
def _ia3_on_input(t) -> bool:
    return bool(int(t["on_input"].reshape(-1)[0].item())) if "on_input" in t else False


def _ia3_shape(t):
    size = int(t["weight"].numel())
    return (-1, size) if _ia3_on_input(t) else (size, -1)


IA3 = AlgorithmFamily(
    name="ia3", label="IA3", marker_keys=("on_input",), known_keys=("weight", "on_input"),
    required=((("weight",),),),
    rank=lambda t: None, implied_shape=_ia3_shape, additive=False,
    delta=lambda t, s, w: deltas.ia3_delta(w, float_tensor(t, "weight"), _ia3_on_input(t)) * s,
)

# Full / diff: the stored tensor is the weight change itself.
FULL = AlgorithmFamily(
    name="full", label="Full (diff)", marker_keys=("diff",), known_keys=("diff", "diff_b"),
    rank=lambda t: None,
    implied_shape=lambda t: (int(t["diff"].shape[0]), flat_in(t["diff"].shape)),
    delta=lambda t, s, w: float_tensor(t, "diff").reshape(w.shape) * s,
    bias_key="diff_b", layout_key="diff",
)

# Norm: additive changes to a normalization layer's weight and bias.
NORM = AlgorithmFamily(
    name="norm", label="Norm", marker_keys=("w_norm",), known_keys=("w_norm", "b_norm"),
    rank=lambda t: None,
    implied_shape=lambda t: (int(t["w_norm"].shape[0]), flat_in(t["w_norm"].shape)),
    delta=lambda t, s, w: float_tensor(t, "w_norm").reshape(w.shape) * s,
    bias_key="b_norm", layout_key="w_norm",
)


# OFT (kohya's OFT, LyCORIS's diag-OFT: `oft_blocks` [blocks, size, size], `alpha` the norm constraint per
# output channel; LyCORIS before 2.0: `oft_diag`, the rotations themselves), as A1111's `network_oft` applies
# them: W' = rescale * R^T W per block of output channels, and strength s gives W + s (W' - W).
def _oft_blocks(t) -> torch.Tensor:
    return t["oft_blocks"] if "oft_blocks" in t else t["oft_diag"]


def _oft_check(t):
    blocks = _oft_blocks(t)
    key = "oft_blocks" if "oft_blocks" in t else "oft_diag"
    if blocks.dim() == 4:
        return f"BOFT (butterfly OFT, {key} {list(blocks.shape)}) is not supported; use OFT (diag-oft) or LoRA"
    if blocks.dim() != 3 or blocks.shape[1] != blocks.shape[2]:
        return f"{key} {list(blocks.shape)} must be [blocks, size, size]"
    rescale = t.get("rescale")
    if rescale is not None and rescale.numel() != blocks.shape[0] * blocks.shape[1]:
        return f"rescale {list(rescale.shape)} is not one value per output of {key} {list(blocks.shape)}"
    return None


def _oft_delta(t, scale, weight):
    blocks = _oft_blocks(t).float()
    if "oft_blocks" in t:
        alpha = t.get("alpha")
        constraint = 0.0 if alpha is None else float(alpha.float().reshape(-1)[0]) * weight.shape[0]
        rotation = deltas.oft_rotation(blocks, constraint)
    else:
        rotation = blocks
    return deltas.oft_delta(weight, rotation, float_tensor(t, "rescale"))


OFT = AlgorithmFamily(
    name="oft", label="OFT", marker_keys=("oft_blocks", "oft_diag"), known_keys=("oft_blocks", "oft_diag", "rescale", "alpha"),
    rank=lambda t: None,
    implied_shape=lambda t: (int(_oft_blocks(t).shape[0] * _oft_blocks(t).shape[-1]), -1),
    check=_oft_check, additive=False, scaled=False, delta=_oft_delta,
)
