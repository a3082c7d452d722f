"""PiSSA: LoRA adapters that start as the layer's principal components (Meng et al. 2024, "PiSSA: Principal
Singular values and Singular vectors Adaptation"), and their export as an ordinary Kohya LoRA.

A plain LoRA starts with a random down and a zero up, so its first steps train a random subspace from nothing;
PiSSA starts the adapter as the top-`rank` singular directions of the weight it adapts (the base layer keeping the
residual `W - scale * up @ down`), so the model is unchanged at step 0 and training moves the directions that
matter most. The random draw of the initial adapters also goes away (on mixkit-tiny-sd it moved a heart LoRA's
accuracy by 5 points between seeds, README).

A trained PiSSA adapter is not a LoRA of the *original* weight: its change to the model is
`scale * (up @ down - up0 @ down0)`. `kohya_factors` writes that change as a Kohya LoRA of twice the rank (what
peft's `path_initial_model_for_weight_conversion` does too), factored anew by SVD so that the file's factors are
the size of the change, not of the principal components (whose difference would lose the change to rounding in
an fp16 file). Pure functions on tensors.
"""

from __future__ import annotations

import torch

PISSA = "pissa"
LORA_INITIALISATIONS = ("kaiming", PISSA)


def principal_factors(weight: torch.Tensor, rank: int, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(down, up) with `scale * up @ down` the best rank-`rank` approximation of `weight` (flattened to out x rest),
    the singular values split evenly between them as peft's init_lora_weights="pissa" does. Computed in float32
    (float64 for a half-precision weight's SVD would be no more exact than its storage); returned in float32, down
    shaped (rank, *weight.shape[1:]), up (out, rank) followed by 1s for a convolution."""
    matrix = weight.detach().reshape(weight.shape[0], -1).float()
    if not 0 < rank <= min(matrix.shape):
        raise ValueError(f"PiSSA needs a rank between 1 and the layer's smaller side {min(matrix.shape)} "
                         f"(weight {list(weight.shape)}), got {rank}; lower the rank (network_dim)")
    left, values, right = torch.linalg.svd(matrix, full_matrices=False)
    root = (values[:rank] / scale).sqrt()
    down = root[:, None] * right[:rank]
    up = left[:, :rank] * root[None, :]
    return down.reshape(rank, *weight.shape[1:]), up.reshape(weight.shape[0], rank, *([1] * (weight.ndim - 2)))


def residual_weight(weight: torch.Tensor, down: torch.Tensor, up: torch.Tensor, scale: float) -> torch.Tensor:
    """`weight - scale * up @ down` in the weight's shape, dtype and device: what the base layer holds while the
    adapter carries the principal part."""
    product = up.reshape(up.shape[0], -1).float() @ down.reshape(down.shape[0], -1).float()
    return (weight.float() - scale * product.reshape(weight.shape).to(weight.device)).to(weight.dtype)


def kohya_factors(down: torch.Tensor, up: torch.Tensor, down0: torch.Tensor, up0: torch.Tensor,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(lora_down, lora_up, alpha) of a Kohya LoRA whose change `alpha / rank * lora_up @ lora_down` is the trained
    adapter's change `scale * (up @ down - up0 @ down0)`, at rank 2 * rank (the change's rank is at most that,
    so the factoring is exact to rounding). alpha is the file's rank: scale 1, the magnitude in the factors."""
    rank = down.shape[0]
    flat = (up.reshape(up.shape[0], -1).double() @ down.reshape(rank, -1).double()
            - up0.reshape(up0.shape[0], -1).double() @ down0.reshape(rank, -1).double()) * scale
    left, values, right = torch.linalg.svd(flat, full_matrices=False)
    kept = min(2 * rank, values.shape[0])
    root = values[:kept].sqrt()
    # contiguous: a file format (safetensors) stores only packed tensors
    new_down = (root[:, None] * right[:kept]).float().reshape(kept, *down.shape[1:]).contiguous()
    new_up = (left[:, :kept] * root[None, :]).float().reshape(up.shape[0], kept, *up.shape[2:]).contiguous()
    return new_down, new_up, float(kept)


def file_ranks(rank: int, alpha: float, conv_rank: int | None, conv_alpha: float | None, *,
               pissa: bool) -> dict:
    """The ranks and alphas a run's file holds, for its `ss_network_dim` / `ss_network_alpha` / conv_dim metadata:
    the run's own, or for PiSSA twice the rank with alpha equal to it (`kohya_factors`), so a reader of the metadata
    is told what the tensors hold."""
    if not pissa:
        return {"rank": rank, "alpha": alpha, "conv_rank": conv_rank, "conv_alpha": conv_alpha}
    return {"rank": 2 * rank, "alpha": float(2 * rank), "conv_rank": 2 * conv_rank if conv_rank else conv_rank,
            "conv_alpha": float(2 * conv_rank) if conv_rank else conv_alpha}
