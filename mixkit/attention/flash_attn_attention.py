"""Tri Dao's flash-attn kernels: FlashAttention-3 on Hopper GPUs, FlashAttention-2 elsewhere.

The packages are optional (CUDA-only wheels, built against one torch version), so they are looked
up with `importlib.util.find_spec` for availability and imported only when a call runs.
flash-attn takes [batch, length, heads, head_dim] tensors, so calls transpose in and out.
"""

from __future__ import annotations

import functools
import importlib.util

import torch

from mixkit.attention.registry import AttentionBackend, AttentionBackendUnavailableError, register_backend

INSTALL_HINT = "pip install 'mixkit[cuda]' (or: pip install flash-attn --no-build-isolation) on a CUDA machine"


@functools.lru_cache(maxsize=None)
def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def flash_attn_available() -> bool:
    """True if flash-attn 2 (`flash_attn`) or 3 (`flash_attn_interface`) is installed."""
    return _has_module("flash_attn") or _has_module("flash_attn_interface")


def _use_flash_attn_3(device: torch.device) -> bool:
    # FlashAttention-3 is written for Hopper (sm90); on other GPUs FlashAttention-2 is the kernel.
    return _has_module("flash_attn_interface") and torch.cuda.get_device_capability(device)[0] == 9


def _import_flash_attn_func(version: int):
    module_name = "flash_attn_interface" if version == 3 else "flash_attn"
    try:
        module = __import__(module_name)
    except ImportError as error:
        raise AttentionBackendUnavailableError(
            f"Attention backend 'flash_attn' needs the {module_name!r} package, which failed to import "
            f"({error}). {INSTALL_HINT}, built for torch {torch.__version__}.") from error
    return module.flash_attn_func


def flash_attn_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
                         dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """flash-attn on [B, H, L, D] tensors; masks are not supported (see `supports_flash_attn`)."""
    q_, k_, v_ = (t.transpose(1, 2) for t in (q, k, v))
    if _use_flash_attn_3(q.device):
        result = _import_flash_attn_func(3)(q_, k_, v_, softmax_scale=scale, causal=is_causal)
    else:
        result = _import_flash_attn_func(2)(q_, k_, v_, dropout_p=dropout_p, softmax_scale=scale, causal=is_causal)
    # Some flash-attn 3 releases return (out, softmax_lse).
    out = result[0] if isinstance(result, tuple) else result
    return out.transpose(1, 2)


def supports_flash_attn(q, k, v, attn_mask=None, is_causal=False, dropout_p=0.0) -> str | None:
    if q.device.type != "cuda":
        return f"flash-attn needs CUDA tensors, got device {q.device.type!r}"
    if q.dtype not in (torch.float16, torch.bfloat16):
        return f"flash-attn needs float16/bfloat16 tensors, got {q.dtype}"
    if attn_mask is not None:
        return "flash-attn takes no attn_mask (padding masks need its varlen API)"
    if q.shape[-1] > 256 or v.shape[-1] != q.shape[-1]:
        return f"flash-attn needs equal q/k/v head dims <= 256, got {q.shape[-1]} and {v.shape[-1]}"
    if is_causal and q.shape[-2] != k.shape[-2]:
        # flash-attn aligns the causal mask bottom-right, SDPA (our convention) top-left; they agree
        # only for square masks.
        return f"flash-attn's causal mask differs from SDPA's when query length {q.shape[-2]} != key length {k.shape[-2]}"
    if torch.cuda.get_device_capability(q.device) < (8, 0):
        return f"flash-attn 2/3 need an sm80+ GPU, got {torch.cuda.get_device_name(q.device)}"
    if not _use_flash_attn_3(q.device) and not _has_module("flash_attn"):
        return (f"only flash-attn 3 is installed, and it is built for Hopper (sm90) GPUs, not "
                f"{torch.cuda.get_device_name(q.device)}; pip install flash-attn (version 2) for this GPU")
    if dropout_p > 0.0 and _use_flash_attn_3(q.device):
        return f"flash-attn 3 has no dropout (dropout_p={dropout_p})"
    return None


FLASH_ATTN = register_backend(AttentionBackend(
    name="flash_attn",
    fn=flash_attn_attention,
    description="flash-attn 2/3 (CUDA, fp16/bf16, no masks); fastest on Ampere/Hopper.",
    supports=supports_flash_attn,
    is_available=flash_attn_available,
    install_hint=INSTALL_HINT,
    cuda_only=True,
))
