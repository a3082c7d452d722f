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


def ia3_delta(weight: torch.Tensor, ia3: torch.Tensor, on_input: bool) -> torch.Tensor:
    """IA3: the change W ⊙ ia3 per input or per output channel (the file stores the learned rescale minus 1)."""
    if on_input:
        return weight * ia3.reshape(1, -1, *([1] * (weight.dim() - 2)))
    return weight * ia3.reshape(-1, *([1] * (weight.dim() - 1)))


def glora_delta(weight: torch.Tensor, a1: torch.Tensor, a2: torch.Tensor, b1: torch.Tensor, b2: torch.Tensor,
                scale: float) -> torch.Tensor:
    """GLoRA (LyCORIS): scale * (W @ a1 @ a2 + b1 @ b2), a1 [in, r], a2 [r, in], b1 [out, r], b2 [r, in*k*k].

    On a convolution W @ a1 @ a2 mixes input channels only (the kernel axes stay), as LyCORIS's einsum does."""
    a1, a2 = a1.reshape(a1.shape[0], -1), a2.reshape(a2.shape[0], -1)
    through_a = torch.einsum("oi...,ij->oj...", torch.einsum("oi...,ij->oj...", weight, a1), a2)
    through_b = (b1.reshape(b1.shape[0], -1) @ b2.reshape(b2.shape[0], -1)).reshape(weight.shape)
    return (through_a + through_b) * scale


def oft_rotation(blocks: torch.Tensor, constraint: float) -> torch.Tensor:
    """OFT's block rotations R = (I + Q)(I - Q)^-1 from Q = B - B^T, Q's norm clamped to `constraint` when it
    is not 0, exactly as A1111's `network_oft` does (kohya's and LyCORIS's diag-OFT `oft_blocks`)."""
    q = blocks - blocks.transpose(-1, -2)
    if constraint != 0:
        norm = torch.norm(q.flatten())
        q = q * ((torch.clamp(norm, max=constraint) + 1e-8) / (norm + 1e-8))
    eye = torch.eye(blocks.shape[-1], dtype=blocks.dtype)
    return (eye + q) @ torch.linalg.inv(eye - q)


def oft_delta(weight: torch.Tensor, rotation: torch.Tensor, rescale: torch.Tensor | None) -> torch.Tensor:
    """OFT: the output channels of W, in blocks, rotated by R^T (then rescaled per channel), minus W."""
    blocks, size = rotation.shape[0], rotation.shape[1]
    grouped = weight.reshape(blocks, size, *weight.shape[1:])
    merged = torch.einsum("knm,kn...->km...", rotation, grouped).reshape(weight.shape)
    if rescale is not None:
        merged = rescale.reshape(-1, *([1] * (weight.dim() - 1))) * merged
    return merged - weight


def dora_weight(weight: torch.Tensor, dora_scale: torch.Tensor) -> torch.Tensor:
    """DoRA as LyCORIS defines it at full strength: W' * m / ||W'||, for W' = W0 + ΔW.

    The norm is per output row for a `[out, 1, ...]` magnitude and per input column for a `[1, in, ...]`
    one, plus float32 eps. The strength is applied by the caller to the result's change from W0 (A1111's
    and ComfyUI's form, see `ModuleWeights.weight_change`).
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
    return weight * (dora_scale.reshape(norm.shape) / norm)


def peft_dora_weight(merged: torch.Tensor, magnitude: torch.Tensor) -> torch.Tensor:
    """DoRA as PEFT (and so diffusers) defines it: m * (W0 + s·ΔW) / ||W0 + s·ΔW||, the norm per output row.

    Unlike LyCORIS's form (`dora_weight`) the strength scales ΔW inside the norm (PEFT's `scaling`, which
    diffusers' adapter weight multiplies), and there is no eps; `merged` is W0 + strength·ΔW."""
    norm = merged.reshape(merged.shape[0], -1).norm(dim=1).reshape(merged.shape[0], *([1] * (merged.dim() - 1)))
    return merged * (magnitude.reshape(norm.shape) / norm)
