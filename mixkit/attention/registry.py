"""The attention backend registry: every kernel mixkit can run, keyed by name, with its constraints.

Kernels differ in what they accept (device, dtype, head dim, masks, dropout). Instead of each model
knowing those rules, each backend declares them in `supports`, and one dispatcher
(`mixkit.attention.dispatch`) asks. Adding a kernel is one `ATTENTION_BACKENDS.register(...)` call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from mixkit.errors import MixkitError
from mixkit.registry import Registry

AttentionFn = Callable[..., torch.Tensor]
"""fn(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None) on [B, H, L, D] tensors."""

SupportsFn = Callable[..., Optional[str]]
"""supports(q, k, v, attn_mask=None, is_causal=False, dropout_p=0.0) -> None if it fits, else why not."""


class AttentionBackendUnavailableError(MixkitError, ImportError):
    """A backend was requested by name but its package is not installed (or unusable here)."""


def _always_available() -> bool:
    return True


def _fits_everything(q, k, v, attn_mask=None, is_causal=False, dropout_p=0.0) -> None:
    return None


@dataclass(frozen=True)
class AttentionBackend:
    """One attention kernel and the rules for when it may run.

    `fn` takes [batch, heads, length, head_dim] tensors, like `torch.nn.functional.
    scaled_dot_product_attention`, and follows its mask semantics: a bool mask is True where a
    query may attend, a float mask is added to the scores; `is_causal` is top-left aligned.
    `supports` must be cheap: the `auto` choice calls it on every attention call.
    """

    name: str
    fn: AttentionFn
    description: str
    supports: SupportsFn = _fits_everything
    is_available: Callable[[], bool] = _always_available
    install_hint: str = "it ships with PyTorch"
    cuda_only: bool = False

    def unavailable_message(self) -> str:
        return (f"Attention backend {self.name!r} is not available in this environment: {self.install_hint}. "
                f"Or choose 'auto' / one of the available backends: {', '.join(available_backend_names())}.")


ATTENTION_BACKENDS: Registry[AttentionBackend] = Registry("attention backend")


def register_backend(backend: AttentionBackend) -> AttentionBackend:
    """Register `backend` under its own name (the name lives in one place: the dataclass)."""
    return ATTENTION_BACKENDS.register(backend.name, backend)


def available_backend_names() -> list[str]:
    """Names of the registered backends that can run on this machine: their packages import, and CUDA-only kernels
    only when CUDA is there (offering `sdpa_efficient` on a CPU-only machine sent users to a kernel that refuses
    every call)."""
    cuda = torch.cuda.is_available()
    return [name for name, backend in ATTENTION_BACKENDS.items()
            if backend.is_available() and (cuda or not backend.cuda_only)]


def require_available(backend: AttentionBackend) -> AttentionBackend:
    """Return `backend`, or raise an error that says what to install."""
    if not backend.is_available():
        raise AttentionBackendUnavailableError(backend.unavailable_message())
    return backend
