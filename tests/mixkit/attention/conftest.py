"""Fixtures for attention tests: a clean backend choice per test, and a spy backend."""

from __future__ import annotations

import pytest
import torch

import mixkit.attention.dispatch as dispatch
from mixkit.attention import ATTENTION_BACKENDS, AttentionBackend
from mixkit.attention.math_attention import math_attention


@pytest.fixture(autouse=True, scope="package")
def single_torch_thread():
    """Tiny models run fastest on one thread; on a shared 2-core machine, more threads spin-wait
    against other processes (measured: tiny UNet forward 0.05 s on 1 thread, 3-4 s on 2 under load)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(autouse=True)
def default_backend_restored(monkeypatch):
    """Every test starts from the "auto" default and cannot leak a set_attention_backend call."""
    monkeypatch.setattr(dispatch, "_default_backend", dispatch.AUTO)


class SpyKernel:
    """Counts calls and delegates to the math kernel, to prove a model really asks the dispatcher."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[int, ...], str | None]] = []

    def __call__(self, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        self.calls.append((tuple(q.shape), None if attn_mask is None else str(attn_mask.dtype)))
        return math_attention(q, k, v, attn_mask, dropout_p, is_causal, scale)


@pytest.fixture
def spy_backend(monkeypatch) -> SpyKernel:
    """A backend registered as "spy" for the duration of one test."""
    kernel = SpyKernel()
    backend = AttentionBackend(name="spy", fn=kernel, description="test spy")
    monkeypatch.setitem(ATTENTION_BACKENDS._entries, "spy", backend)
    return kernel
