"""Weight-delta math of every LoRA family, as pure functions on float32 tensors.

Definitions follow the LyCORIS reference (KohakuBlueleaf/LyCORIS) and kohya's sd-scripts, the
projects that define these file formats; `scale` is always alpha/rank already resolved by the
caller (`rank_scale`).
"""

from __future__ import annotations

import torch


def rank_scale(alpha: float | None, rank: int) -> float:
    """alpha/rank; a missing alpha or alpha 0 means 'no scaling' (scale 1), as in kohya and LyCORIS."""
    if alpha is None or alpha == 0:
        return 1.0
    return float(alpha) / float(rank)


def rebuild_tucker(core: torch.Tensor, out_factor: torch.Tensor, in_factor: torch.Tensor) -> torch.Tensor:
    """W[o, i, k...] = sum_ab core[a, b, k...] * out_factor[a, o] * in_factor[b, i] (Tucker / CP rebuild)."""
    return torch.einsum("ab...,ao,bi->oi...", core, out_factor, in_factor)


def lora_delta(down: torch.Tensor, up: torch.Tensor, mid: torch.Tensor | None, scale: float,
               shape: torch.Size) -> torch.Tensor:
    """LoRA / LoCon: scale * up @ down; with a Tucker `mid` the 3x3 core sits between the 1x1 factors."""
    if mid is None:
        delta = up.reshape(up.shape[0], -1) @ down.reshape(down.shape[0], -1)
    else:
        delta = rebuild_tucker(mid, up.reshape(up.shape[0], -1).t(), down.reshape(down.shape[0], -1))
    return (delta * scale).reshape(shape)


def loha_delta(w1a: torch.Tensor, w1b: torch.Tensor, w2a: torch.Tensor, w2b: torch.Tensor,
               t1: torch.Tensor | None, t2: torch.Tensor | None, scale: float, shape: torch.Size) -> torch.Tensor:
    """LoHa: scale * (w1a @ w1b) ⊙ (w2a @ w2b); with Tucker cores each half is a Tucker rebuild."""
    if t1 is not None and t2 is not None:
        first = rebuild_tucker(t1, w1a, w1b)
        second = rebuild_tucker(t2, w2a, w2b)
    else:
        first = w1a @ w1b.reshape(w1b.shape[0], -1)
        second = w2a @ w2b.reshape(w2b.shape[0], -1)
    return (first * second * scale).reshape(shape)


def lokr_delta(w1: torch.Tensor, w2: torch.Tensor, scale: float, shape: torch.Size) -> torch.Tensor:
    """LoKr: scale * kron(w1, w2); a conv w2 keeps its kernel axes, so w1 gets singleton ones."""
    while w1.dim() < w2.dim():
        w1 = w1.unsqueeze(-1)
    return (torch.kron(w1, w2.contiguous()) * scale).reshape(shape)


def lokr_half(full: torch.Tensor | None, a: torch.Tensor | None, b: torch.Tensor | None,
              tucker: torch.Tensor | None) -> torch.Tensor:
    """One Kronecker factor of LoKr: stored whole, as a @ b, or as a Tucker rebuild.

    A non-Tucker conv factor stays flat `[out, in*k*k]`: kron with a 2-D w1 then lays the kernel
    axes out exactly as the final reshape to `[out, in, k, k]` expects.
    """
    if full is not None:
        return full
    if tucker is not None:
        return rebuild_tucker(tucker, a, b)
    return a @ b.reshape(b.shape[0], -1)


def ia3_weight(weight: torch.Tensor, ia3: torch.Tensor, on_input: bool, strength: float) -> torch.Tensor:
    """IA3: W scaled per input or per output channel by (1 + strength * ia3)."""
    factor = ia3.reshape(-1) * strength + 1.0
    if on_input:
        return weight * factor.reshape(1, -1, *([1] * (weight.dim() - 2)))
    return weight * factor.reshape(-1, *([1] * (weight.dim() - 1)))


def dora_weight(weight: torch.Tensor, dora_scale: torch.Tensor, strength: float) -> torch.Tensor:
    """DoRA as LyCORIS defines it: W * (strength * (m / ||W|| - 1) + 1).

    `weight` is already W0 + ΔW at full strength (LyCORIS does not scale ΔW by the multiplier for
    DoRA); the norm is per output row for a `[out, 1, ...]` magnitude and per input column for a
    `[1, in, ...]` one, plus float32 eps.
    """
    per_output = dora_scale.shape[0] == weight.shape[0] and (dora_scale.dim() == 1 or dora_scale.shape[1] == 1)
    if per_output:
        norm = weight.reshape(weight.shape[0], -1).norm(dim=1).reshape(weight.shape[0], *([1] * (weight.dim() - 1)))
    else:
        norm = (
            weight.transpose(0, 1).reshape(weight.shape[1], -1).norm(dim=1, keepdim=True)
            .reshape(weight.shape[1], *([1] * (weight.dim() - 1))).transpose(0, 1)
        )
    norm = norm + torch.finfo(weight.dtype).eps
    factor = dora_scale.reshape(norm.shape) / norm
    if strength != 1:
        factor = strength * (factor - 1) + 1
    return weight * factor


def peft_dora_weight(merged: torch.Tensor, magnitude: torch.Tensor) -> torch.Tensor:
    """DoRA as PEFT (and so diffusers) defines it: m * (W0 + s·ΔW) / ||W0 + s·ΔW||, the norm per output row.

    Unlike LyCORIS's form (`dora_weight`) the strength scales ΔW inside the norm (PEFT's `scaling`, which
    diffusers' adapter weight multiplies), and there is no eps; `merged` is W0 + strength·ΔW."""
    norm = merged.reshape(merged.shape[0], -1).norm(dim=1).reshape(merged.shape[0], *([1] * (merged.dim() - 1)))
    return merged * (magnitude.reshape(norm.shape) / norm)
