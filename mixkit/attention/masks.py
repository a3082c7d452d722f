"""Mask conversions shared by kernels that accept only one mask form.

mixkit follows PyTorch SDPA's convention everywhere: a bool mask is True where a query may attend,
a float mask is added to the scores. Kernels such as xformers only take an additive bias.
"""

from __future__ import annotations

import torch


def causal_bool_mask(query_length: int, key_length: int, device: torch.device) -> torch.Tensor:
    """[Lq, Lk] bool mask, True on and below the diagonal, aligned top-left like SDPA's `is_causal`."""
    return torch.ones(query_length, key_length, dtype=torch.bool, device=device).tril()


def additive_mask(attn_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A float mask to add to the scores: bool False becomes -inf, floats are cast to `dtype`."""
    if attn_mask.dtype == torch.bool:
        bias = torch.zeros(attn_mask.shape, dtype=dtype, device=attn_mask.device)
        return bias.masked_fill(~attn_mask, float("-inf"))
    return attn_mask.to(dtype)
