"""Every registered backend agrees with the `math` reference, case by case.

Generated from the registry, so a newly registered backend is tested by construction. Backends
marked `cuda_only` run only on CUDA and are skipped (with the reason) on machines without it.
A backend that declares it cannot take a case must refuse it loudly when asked by name.
"""

from __future__ import annotations

import pytest
import torch

from mixkit.attention import ATTENTION_BACKENDS, attention
from mixkit.attention.math_attention import math_attention

NO_CUDA = not torch.cuda.is_available()
NEEDS_CUDA = pytest.mark.skipif(NO_CUDA, reason="CUDA backends and dtypes are tested only when CUDA is present")

# name: (batch, heads, query_len, key_len, head_dim, mask kind, is_causal). Head dims include
# odd ones (33, 7) and SD's 40; key_len 77 is SD's cross-attention context.
CASES = {
    "self_d40": (2, 3, 64, 64, 40, None, False),
    "cross77_boolmask_d33": (2, 2, 33, 77, 33, "bool", False),
    "floatmask_d7": (1, 4, 17, 19, 7, "float", False),
    "key_padding_d24": (2, 3, 10, 12, 24, "padding", False),
    "causal_square_d80": (2, 2, 24, 24, 80, None, True),
    "causal_rect_d16": (1, 2, 5, 9, 16, None, True),
}
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


def _inputs(case: str, dtype: torch.dtype, device: str):
    batch, heads, lq, lk, dim, mask_kind, causal = CASES[case]
    gen = torch.Generator().manual_seed(sum(map(ord, case)))
    q, k, v = (torch.randn(batch, heads, length, dim, generator=gen) for length in (lq, lk, lk))
    mask = None
    if mask_kind == "bool":
        mask = torch.rand(batch, 1, lq, lk, generator=gen) > 0.5
        mask[..., 0] = True  # no fully masked rows: kernels disagree on those (see test_math_attention)
    elif mask_kind == "float":
        mask = torch.randn(batch, heads, lq, lk, generator=gen).to(dtype)
    elif mask_kind == "padding":  # [B, 1, 1, Lk], the shape text-encoder padding masks have
        mask = torch.ones(batch, 1, 1, lk, dtype=torch.bool)
        mask[1, ..., lk // 2:] = False
    to = lambda t: None if t is None else t.to(device)  # noqa: E731
    return to(q.to(dtype)), to(k.to(dtype)), to(v.to(dtype)), to(mask), causal


def _params():
    for name, backend in ATTENTION_BACKENDS.items():
        if name == "math":
            continue
        for device in (["cuda"] if backend.cuda_only else ["cpu", "cuda"]):
            dtypes = [torch.float32, torch.bfloat16] + ([torch.float16] if device == "cuda" else [])
            for dtype in dtypes:
                marks = [NEEDS_CUDA] if device == "cuda" else []
                yield pytest.param(name, device, dtype, marks=marks, id=f"{name}-{device}-{str(dtype)[6:]}")


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name, device, dtype", list(_params()))
def test_backend_agrees_with_math(name, device, dtype, case):
    backend = ATTENTION_BACKENDS.get(name)
    if not backend.is_available():
        pytest.skip(f"{name} is not installed here: {backend.install_hint}")
    q, k, v, mask, causal = _inputs(case, dtype, device)
    reason = backend.supports(q, k, v, mask, causal, 0.0)
    if reason is not None:
        with pytest.raises(ValueError, match="cannot run this call"):
            attention(q, k, v, attn_mask=mask, is_causal=causal, backend=name)
        return
    out = attention(q, k, v, attn_mask=mask, is_causal=causal, backend=name)
    expected = math_attention(q, k, v, attn_mask=mask, is_causal=causal)
    assert out.dtype == dtype and out.shape == expected.shape
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(out.float(), expected.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", [n for n, b in ATTENTION_BACKENDS.items() if not b.cuda_only])
def test_cpu_backends_take_every_agreement_case_on_cpu(name):
    """Guards the test above: on CPU every non-CUDA backend must actually compute every case."""
    backend = ATTENTION_BACKENDS.get(name)
    for case in CASES:
        for dtype in (torch.float32, torch.bfloat16):
            q, k, v, mask, causal = _inputs(case, dtype, "cpu")
            assert backend.supports(q, k, v, mask, causal, 0.0) is None, (name, case, dtype)


@pytest.mark.parametrize("name", [n for n, b in ATTENTION_BACKENDS.items() if b.cuda_only])
def test_cuda_only_backends_refuse_cpu_tensors_with_a_reason(name):
    backend = ATTENTION_BACKENDS.get(name)
    q, k, v, mask, causal = _inputs("self_d40", torch.float16, "cpu")
    reason = backend.supports(q, k, v, mask, causal, 0.0)
    assert reason is not None and "cpu" in reason.lower()


@pytest.mark.parametrize("name", ["sdpa", "sdpa_flash", "sdpa_math"])
def test_sdpa_variants_are_exact_where_they_share_a_kernel_with_math_in_float64(name):
    # float64 on CPU leaves no room for rounding differences: any semantic slip (scale, mask
    # sign, causal alignment) would show up far above 1e-10.
    q, k, v, mask, causal = _inputs("cross77_boolmask_d33", torch.float64, "cpu")
    out = attention(q, k, v, attn_mask=mask, scale=0.2, backend=name)
    torch.testing.assert_close(out, math_attention(q, k, v, attn_mask=mask, scale=0.2), rtol=1e-10, atol=1e-10)
