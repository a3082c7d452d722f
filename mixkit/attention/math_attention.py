"""The reference attention kernel: plain tensor algebra, computed in float32 or better.

Every other backend is tested against this one, so it favours being obviously right over being
fast: scores and softmax are computed in float32 (float64 stays float64) whatever the input
dtype, which is also what diffusers' `upcast_attention` and transformers' eager path do.
"""

from __future__ import annotations

import torch

from mixkit.attention.masks import causal_bool_mask
from mixkit.attention.registry import AttentionBackend, register_backend


def math_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
                   dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v on [B, H, L, D] tensors, with SDPA's mask semantics."""
    compute_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = torch.matmul(q.to(compute_dtype), k.to(compute_dtype).transpose(-2, -1)) * scale
    if is_causal:
        allowed = causal_bool_mask(q.shape[-2], k.shape[-2], q.device)
        scores = scores.masked_fill(~allowed, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask.to(compute_dtype)
    probs = torch.softmax(scores, dim=-1)
    # A query whose every key is masked has softmax(-inf, ..., -inf) = NaN. PyTorch's SDPA (>= 2.5)
    # returns zeros for such rows; we match it so backends stay interchangeable.
    fully_masked = torch.isneginf(scores).all(dim=-1, keepdim=True)
    probs = probs.masked_fill(fully_masked, 0.0)
    if dropout_p > 0.0:
        probs = torch.nn.functional.dropout(probs, p=dropout_p, training=True)
    return torch.matmul(probs, v.to(compute_dtype)).to(q.dtype)


MATH = register_backend(AttentionBackend(
    name="math",
    fn=math_attention,
    description="Reference kernel in plain PyTorch ops (float32 softmax); slow, fits everything.",
))
