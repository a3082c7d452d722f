"""The one place that chooses an attention kernel; every mixkit-patched model calls `attention()`.

The choice comes from, in order: the `backend=` argument of a call, the innermost
`attention_backend(name)` context, the process-wide `set_attention_backend(name)` default
("auto" until set). The context is a `contextvars.ContextVar`, so threads and asyncio tasks
that enter their own context do not see each other's choice.

"auto" picks per call, from the call's own tensors, the first backend in `AUTO_PREFERENCE` for the
device that is installed and whose `supports` accepts the inputs, so a UNet in fp16 and a VAE in
fp32 in the same process can get different kernels. The check is a few attribute reads per
backend, cheap next to any attention kernel, so the choice is not cached.

A backend named explicitly never silently falls back: if it cannot run a call, the call raises
with the backend's reason.
"""

from __future__ import annotations

import contextlib
import contextvars
import numbers
from typing import Iterator

import torch

from mixkit.attention.registry import ATTENTION_BACKENDS, AttentionBackend, require_available
from mixkit.errors import UnknownNameError

AUTO = "auto"

AUTO_PREFERENCE: dict[str, tuple[str, ...]] = {
    # Fastest first, measured by their authors and diffusers on Ampere/Hopper: flash-attn's own
    # kernels, then xformers, then PyTorch's SDPA (which itself picks flash/efficient/cuDNN).
    "cuda": ("flash_attn", "xformers", "sdpa"),
    # On CPU (and MPS/XPU) PyTorch's SDPA has the only optimised kernels.
    "cpu": ("sdpa",),
}
DEFAULT_PREFERENCE: tuple[str, ...] = ("sdpa",)
LAST_RESORT = "math"

_default_backend: str = AUTO
_context_backend: contextvars.ContextVar[str | None] = contextvars.ContextVar("mixkit_attention_backend", default=None)


def resolve_backend_name(name: str) -> str:
    """Validate a user-given backend name and return its canonical spelling ("auto" or a registered name).

    Raises UnknownNameError for an unknown name and AttentionBackendUnavailableError (an
    ImportError saying what to install) for a backend whose package is missing.
    """
    if not isinstance(name, str):
        raise TypeError(f"attention backend must be a name (str), got {type(name).__name__}: {name!r}")
    if name.strip().casefold() == AUTO:
        return AUTO
    try:
        entry = ATTENTION_BACKENDS.get(name)
    except UnknownNameError:
        raise UnknownNameError(ATTENTION_BACKENDS.unknown_message(name) + f" Or {AUTO!r} to choose per call.") from None
    return require_available(entry).name


def set_attention_backend(name: str) -> None:
    """Set the process-wide default backend ("auto" or a registered name)."""
    global _default_backend
    _default_backend = resolve_backend_name(name)


def get_attention_backend() -> str:
    """The backend name in effect here: the innermost `attention_backend` context, else the default."""
    return _context_backend.get() or _default_backend


@contextlib.contextmanager
def attention_backend(name: str) -> Iterator[str]:
    """Use backend `name` for attention calls inside the `with` block (restored on exit, even on error)."""
    token = _context_backend.set(resolve_backend_name(name))
    try:
        yield _context_backend.get()
    finally:
        _context_backend.reset(token)


def auto_preference(device_type: str) -> tuple[str, ...]:
    """Backends "auto" tries on `device_type`, fastest first; `math` is always the last resort."""
    return AUTO_PREFERENCE.get(device_type, DEFAULT_PREFERENCE) + (LAST_RESORT,)


def select_backend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
                   is_causal: bool = False, dropout_p: float = 0.0, backend: str | None = None) -> AttentionBackend:
    """The backend that will run this call (inputs are assumed valid; see `check_attention_inputs`)."""
    name = resolve_backend_name(backend) if backend is not None else get_attention_backend()
    if name == AUTO:
        for candidate in auto_preference(q.device.type):
            chosen = ATTENTION_BACKENDS.get(candidate)
            if chosen.is_available() and chosen.supports(q, k, v, attn_mask, is_causal, dropout_p) is None:
                return chosen
        return ATTENTION_BACKENDS.get(LAST_RESORT)
    chosen = require_available(ATTENTION_BACKENDS.get(name))
    reason = chosen.supports(q, k, v, attn_mask, is_causal, dropout_p)
    if reason is not None:
        raise ValueError(
            f"Attention backend {name!r} cannot run this call (q {tuple(q.shape)} {q.dtype} on {q.device}, "
            f"mask {'none' if attn_mask is None else tuple(attn_mask.shape)}, is_causal={is_causal}): {reason}. "
            f"Use {AUTO!r} to let mixkit pick a backend that fits each call.")
    return chosen


def check_attention_inputs(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None) -> None:
    """Raise TypeError/ValueError naming the offending argument if the inputs are not a valid attention call."""
    for label, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"attention: {label} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.ndim != 4:
            raise ValueError(f"attention: {label} must be [batch, heads, length, head_dim], got shape {tuple(tensor.shape)}")
        if not tensor.is_floating_point():
            raise TypeError(f"attention: {label} must be a floating-point tensor, got {tensor.dtype}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"attention: q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"attention: q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    if q.shape[:2] != k.shape[:2] or k.shape[:2] != v.shape[:2]:
        raise ValueError(f"attention: q, k, v must share [batch, heads], got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"attention: q and k must share head_dim, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: k and v must share length, got {k.shape[-2]} and {v.shape[-2]}")
    if not isinstance(is_causal, bool):
        raise TypeError(f"attention: is_causal must be a bool, got {is_causal!r}")
    if attn_mask is not None:
        if not isinstance(attn_mask, torch.Tensor):
            raise TypeError(f"attention: attn_mask must be a torch.Tensor or None, got {type(attn_mask).__name__}")
        if attn_mask.dtype not in (torch.bool, q.dtype):
            raise TypeError(f"attention: attn_mask must be bool (True = attend) or {q.dtype} (added to scores), "
                            f"got {attn_mask.dtype}")
        scores_shape = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
        if not 2 <= attn_mask.ndim <= 4:  # PyTorch's SDPA rejects 1-D masks; we keep one rule for all
            raise ValueError(f"attention: attn_mask must have 2 to 4 dims broadcasting to {list(scores_shape)}, "
                             f"got shape {tuple(attn_mask.shape)}")
        try:
            broadcast = torch.broadcast_shapes(attn_mask.shape, scores_shape)
        except RuntimeError:
            broadcast = None
        if broadcast != torch.Size(scores_shape):
            raise ValueError(f"attention: attn_mask shape {tuple(attn_mask.shape)} does not broadcast to the "
                             f"scores shape [batch, heads, query_len, key_len] = {list(scores_shape)}")
        if attn_mask.device != q.device:
            raise ValueError(f"attention: attn_mask is on {attn_mask.device}, q on {q.device}")
        if is_causal:
            raise ValueError("attention: pass either attn_mask or is_causal=True, not both "
                             "(fold the causal pattern into the mask)")
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, numbers.Real) or not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"attention: dropout_p must be a float in [0, 1), got {dropout_p!r}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, numbers.Real)):
        raise TypeError(f"attention: scale must be a float or None (1/sqrt(head_dim)), got {scale!r}")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
              dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None, *,
              backend: str | None = None) -> torch.Tensor:
    """Scaled dot-product attention on [B, H, L, D] tensors, run by the selected backend.

    Semantics are PyTorch SDPA's: bool mask True = attend, float mask added to the scores,
    `is_causal` top-left aligned, `scale` defaults to 1/sqrt(head_dim). Returns [B, H, Lq, Dv].
    """
    check_attention_inputs(q, k, v, attn_mask, dropout_p, is_causal, scale)
    chosen = select_backend(q, k, v, attn_mask, is_causal, float(dropout_p), backend)
    return chosen.fn(q, k, v, attn_mask=attn_mask, dropout_p=float(dropout_p), is_causal=is_causal, scale=scale)
