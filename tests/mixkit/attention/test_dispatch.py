"""The dispatcher: auto choice, explicit choice, global/context switching, input validation."""

from __future__ import annotations

import threading

import pytest
import torch

import mixkit.attention.dispatch as dispatch
from mixkit.attention import (
    attention,
    attention_backend,
    get_attention_backend,
    select_backend,
    set_attention_backend,
)
from mixkit.attention.math_attention import math_attention
from mixkit.errors import UnknownNameError


def _qkv(lq=4, lk=6, dim=8, dtype=torch.float32):
    gen = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, 3, length, dim, generator=gen, dtype=dtype) for length in (lq, lk, lk))


def test_auto_uses_sdpa_on_cpu():
    q, k, v = _qkv()
    assert get_attention_backend() == "auto"
    assert select_backend(q, k, v).name == "sdpa"
    assert dispatch.auto_preference("cpu")[-1] == "math"
    assert dispatch.auto_preference("cuda")[:3] == ("flash_attn", "xformers", "sdpa")


def test_auto_skips_backends_that_do_not_fit_the_call(monkeypatch):
    monkeypatch.setitem(dispatch.AUTO_PREFERENCE, "cpu", ("sdpa_flash", "sdpa"))
    q, k, v = _qkv()
    assert select_backend(q, k, v).name == "sdpa_flash"
    # The CPU flash kernel has no dropout, so the same device/dtype picks the next one.
    assert select_backend(q, k, v, dropout_p=0.1).name == "sdpa"


def test_auto_falls_back_to_math_when_nothing_else_fits(monkeypatch):
    monkeypatch.setitem(dispatch.AUTO_PREFERENCE, "cpu", ("sdpa_efficient",))
    q, k, v = _qkv()
    assert select_backend(q, k, v).name == "math"


def test_a_named_backend_that_cannot_run_the_call_raises_with_its_reason():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"'sdpa_flash' cannot run this call.*dropout.*'auto'"):
        attention(q, k, v, dropout_p=0.1, backend="sdpa_flash")
    with attention_backend("sdpa_efficient"):
        with pytest.raises(ValueError, match="needs CUDA tensors"):
            attention(q, k, v)


def test_context_manager_nests_restores_and_survives_errors():
    assert get_attention_backend() == "auto"
    with attention_backend("math") as chosen:
        assert chosen == "math" and get_attention_backend() == "math"
        with attention_backend("SDPA"):  # names are case-insensitive, canonical spelling is stored
            assert get_attention_backend() == "sdpa"
        assert get_attention_backend() == "math"
        with pytest.raises(RuntimeError):
            with attention_backend("sdpa_math"):
                raise RuntimeError("boom")
        assert get_attention_backend() == "math"
    assert get_attention_backend() == "auto"


def test_global_default_applies_outside_contexts_and_contexts_win():
    set_attention_backend("math")
    assert get_attention_backend() == "math"
    with attention_backend("sdpa"):
        assert get_attention_backend() == "sdpa"
    assert get_attention_backend() == "math"
    set_attention_backend("auto")
    assert get_attention_backend() == "auto"


def test_context_choice_does_not_leak_into_other_threads():
    seen = {}
    with attention_backend("math"):
        worker = threading.Thread(target=lambda: seen.setdefault("backend", get_attention_backend()))
        worker.start()
        worker.join()
    assert seen["backend"] == "auto"


def test_calls_go_to_the_backend_in_effect(spy_backend):
    q, k, v = _qkv()
    attention(q, k, v)
    assert spy_backend.calls == []
    with attention_backend("spy"):
        out = attention(q, k, v, is_causal=True)
        attention(q, k, v, backend="sdpa")  # a per-call backend beats the context
    assert len(spy_backend.calls) == 1
    torch.testing.assert_close(out, math_attention(q, k, v, is_causal=True))
    set_attention_backend("spy")
    attention(q, k, v)
    assert len(spy_backend.calls) == 2


def test_unknown_backend_lists_valid_names_and_auto():
    with pytest.raises(UnknownNameError, match=r"Unknown attention backend 'flashattn'.*Did you mean 'flash_attn'.*'auto'"):
        set_attention_backend("flashattn")
    with pytest.raises(TypeError, match="must be a name"):
        set_attention_backend(None)
    assert get_attention_backend() == "auto"  # a failed set leaves the default alone


def _bad(**overrides):
    q, k, v = _qkv()
    args = dict(q=q, k=k, v=v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None)
    args.update(overrides)
    return args


@pytest.mark.parametrize("args, error, message", [
    (_bad(q=torch.zeros(2, 4, 8)), ValueError, r"q must be \[batch, heads, length, head_dim\], got shape \(2, 4, 8\)"),
    (_bad(k="keys"), TypeError, "k must be a torch.Tensor, got str"),
    (_bad(v=torch.zeros(2, 3, 6, 8, dtype=torch.int64)), TypeError, "v must be a floating-point tensor"),
    (_bad(q=torch.zeros(2, 3, 4, 8, dtype=torch.float64)), TypeError, "share one dtype"),
    (_bad(q=torch.zeros(2, 3, 4, 5)), ValueError, "q and k must share head_dim, got 5 and 8"),
    (_bad(v=torch.zeros(2, 3, 7, 8)), ValueError, "k and v must share length, got 6 and 7"),
    (_bad(k=torch.zeros(1, 3, 6, 8)), ValueError, r"share \[batch, heads\]"),
    (_bad(attn_mask=torch.ones(4, 5, dtype=torch.bool)), ValueError, r"attn_mask shape \(4, 5\) does not broadcast.*\[2, 3, 4, 6\]"),
    (_bad(attn_mask=torch.ones(6, dtype=torch.bool)), ValueError, r"attn_mask must have 2 to 4 dims"),
    (_bad(attn_mask=torch.zeros(4, 6, dtype=torch.float64)), TypeError, "attn_mask must be bool .* or torch.float32"),
    (_bad(attn_mask=torch.ones(4, 6, dtype=torch.bool), is_causal=True), ValueError, "either attn_mask or is_causal"),
    (_bad(is_causal=1), TypeError, "is_causal must be a bool, got 1"),
    (_bad(dropout_p=1.0), ValueError, r"dropout_p must be a float in \[0, 1\), got 1.0"),
    (_bad(scale="0.1"), TypeError, "scale must be a float or None"),
])
def test_invalid_calls_are_rejected_naming_the_argument(args, error, message):
    with pytest.raises(error, match=message):
        attention(**args)


def test_broadcastable_masks_are_accepted():
    q, k, v = _qkv()
    for mask in (torch.ones(1, 6, dtype=torch.bool), torch.zeros(1, 3, 1, 6), torch.ones(2, 1, 4, 6, dtype=torch.bool)):
        torch.testing.assert_close(attention(q, k, v, attn_mask=mask), math_attention(q, k, v, attn_mask=mask))

