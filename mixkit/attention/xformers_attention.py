"""xformers' memory_efficient_attention, for GPUs and setups where it beats PyTorch's kernels.

Optional package (CUDA wheels pinned to one torch version): availability is a `find_spec`
lookup; the import happens on the first call. xformers takes [batch, length, heads, head_dim]
tensors and only an additive float bias, so calls transpose and convert bool masks.
"""

from __future__ import annotations

import functools
import importlib.util

import torch

from mixkit.attention.masks import additive_mask
from mixkit.attention.registry import AttentionBackend, AttentionBackendUnavailableError, register_backend

INSTALL_HINT = "pip install xformers (a build matching your torch; or pip install 'mixkit[cuda]') on a CUDA machine"


@functools.lru_cache(maxsize=None)
def xformers_available() -> bool:
    """True if the xformers package is installed."""
    try:
        return importlib.util.find_spec("xformers") is not None
    except (ImportError, ValueError):
        return False


def _import_xformers_ops():
    try:
        import xformers.ops as xops
    except ImportError as error:
        raise AttentionBackendUnavailableError(
            f"Attention backend 'xformers' failed to import xformers ({error}). {INSTALL_HINT}, "
            f"built for torch {torch.__version__}.") from error
    return xops


def _aligned_bias(attn_mask: torch.Tensor, shape: tuple[int, int, int, int], dtype: torch.dtype) -> torch.Tensor:
    # xformers' CUDA kernels need the bias rows to start on 8-element boundaries, so the bias is
    # materialised in a buffer whose last dim is rounded up to a multiple of 8, then sliced.
    key_length = shape[-1]
    padded = torch.empty(*shape[:-1], (key_length + 7) // 8 * 8, dtype=dtype, device=attn_mask.device)
    bias = padded[..., :key_length]
    bias.copy_(additive_mask(attn_mask, dtype).expand(shape))
    return bias


def xformers_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
                       dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """xformers.ops.memory_efficient_attention on [B, H, L, D] tensors."""
    xops = _import_xformers_ops()
    q_, k_, v_ = (t.transpose(1, 2) for t in (q, k, v))
    bias = None
    if is_causal:
        bias = xops.LowerTriangularMask()
    elif attn_mask is not None:
        shape = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
        bias = _aligned_bias(attn_mask, shape, q.dtype)
    out = xops.memory_efficient_attention(q_, k_, v_, attn_bias=bias, p=dropout_p, scale=scale)
    return out.transpose(1, 2)


def supports_xformers(q, k, v, attn_mask=None, is_causal=False, dropout_p=0.0) -> str | None:
    if q.device.type != "cuda":
        return f"xformers needs CUDA tensors, got device {q.device.type!r}"
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return f"xformers needs float16/bfloat16/float32 tensors, got {q.dtype}"
    if q.shape[-1] > 256 or v.shape[-1] != q.shape[-1]:
        return f"mixkit's xformers backend needs equal q/k/v head dims <= 256, got {q.shape[-1]} and {v.shape[-1]}"
    if is_causal and q.shape[-2] != k.shape[-2]:
        return f"mixkit's xformers backend uses a square causal mask; query length {q.shape[-2]} != key length {k.shape[-2]}"
    return None


XFORMERS = register_backend(AttentionBackend(
    name="xformers",
    fn=xformers_attention,
    description="xformers memory_efficient_attention (CUDA; fp16/bf16/fp32; masks as bias).",
    supports=supports_xformers,
    is_available=xformers_available,
    install_hint=INSTALL_HINT,
    cuda_only=True,
))
