"""PyTorch's scaled_dot_product_attention, free to choose its kernel or pinned to one variant.

`sdpa` lets PyTorch pick (flash, memory-efficient, cuDNN or math) and always fits. The pinned
variants exist to compare kernels and to force one when debugging; each declares what its kernel
accepts, because a pinned SDPA call with no fitting kernel fails with an opaque "No available
kernel" error.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from mixkit.attention.registry import AttentionBackend, register_backend


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
                   dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention, PyTorch choosing the kernel."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                          is_causal=is_causal, scale=scale)


def _pinned(kernel: SDPBackend):
    def pinned_sdpa_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        with sdpa_kernel([kernel]):
            return sdpa_attention(q, k, v, attn_mask, dropout_p, is_causal, scale)

    pinned_sdpa_attention.__doc__ = f"scaled_dot_product_attention restricted to PyTorch's {kernel.name} kernel."
    return pinned_sdpa_attention


def _cuda_kernel_accepts(checker, q, k, v, attn_mask, is_causal, dropout_p) -> bool:
    params = torch.backends.cuda.SDPAParams(q, k, v, attn_mask, dropout_p, is_causal, False)
    return bool(checker(params, False))


def supports_sdpa_flash(q, k, v, attn_mask=None, is_causal=False, dropout_p=0.0) -> str | None:
    if q.device.type == "cuda":
        if q.dtype not in (torch.float16, torch.bfloat16):
            return f"PyTorch's CUDA flash kernel needs float16/bfloat16 tensors, got {q.dtype}"
        if attn_mask is not None:
            return "PyTorch's CUDA flash kernel takes no attn_mask"
        if not _cuda_kernel_accepts(torch.backends.cuda.can_use_flash_attention, q, k, v, attn_mask,
                                    is_causal, dropout_p):
            return (f"PyTorch's CUDA flash kernel rejects these inputs (head dim {q.shape[-1]}, "
                    f"GPU {torch.cuda.get_device_name(q.device)}); it needs head dim <= 256 and an sm80+ GPU")
        return None
    if q.device.type == "cpu":
        # Measured on torch 2.13: the CPU flash kernel takes masks, any float dtype and odd head
        # dims, but not dropout and not a value head dim different from the query's.
        if dropout_p > 0.0:
            return f"PyTorch's CPU flash kernel does not support dropout (dropout_p={dropout_p})"
        if v.shape[-1] != q.shape[-1]:
            return f"PyTorch's CPU flash kernel needs equal q/v head dims, got {q.shape[-1]} and {v.shape[-1]}"
        return None
    return f"PyTorch's flash kernel runs on CPU or CUDA tensors, got device {q.device.type!r}"


def supports_sdpa_efficient(q, k, v, attn_mask=None, is_causal=False, dropout_p=0.0) -> str | None:
    if q.device.type != "cuda":
        return f"PyTorch's memory-efficient kernel needs CUDA tensors, got device {q.device.type!r}"
    if not _cuda_kernel_accepts(torch.backends.cuda.can_use_efficient_attention, q, k, v, attn_mask,
                                is_causal, dropout_p):
        return f"PyTorch's memory-efficient kernel rejects these inputs (dtype {q.dtype}, head dim {q.shape[-1]})"
    return None


SDPA = register_backend(AttentionBackend(
    name="sdpa",
    fn=sdpa_attention,
    description="PyTorch scaled_dot_product_attention; PyTorch picks flash, memory-efficient or math.",
))
SDPA_FLASH = register_backend(AttentionBackend(
    name="sdpa_flash",
    fn=_pinned(SDPBackend.FLASH_ATTENTION),
    description="PyTorch SDPA pinned to its flash kernel (CPU or CUDA).",
    supports=supports_sdpa_flash,
))
SDPA_EFFICIENT = register_backend(AttentionBackend(
    name="sdpa_efficient",
    fn=_pinned(SDPBackend.EFFICIENT_ATTENTION),
    description="PyTorch SDPA pinned to its memory-efficient kernel (CUDA only).",
    supports=supports_sdpa_efficient,
    cuda_only=True,
))
SDPA_MATH = register_backend(AttentionBackend(
    name="sdpa_math",
    fn=_pinned(SDPBackend.MATH),
    description="PyTorch SDPA pinned to its math kernel (PyTorch's own reference path).",
))
