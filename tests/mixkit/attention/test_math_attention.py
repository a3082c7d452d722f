"""The reference kernel against exact hand-computed cases and PyTorch's float64 math SDPA."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from mixkit.attention.math_attention import math_attention


def _values(batch=1, heads=2, length=5, dim=3, dtype=torch.float32):
    return torch.arange(batch * heads * length * dim, dtype=dtype).reshape(batch, heads, length, dim) / 7.0


def test_single_key_returns_its_value_exactly():
    q = torch.randn(1, 2, 4, 3, generator=torch.Generator().manual_seed(0))
    k = torch.randn(1, 2, 1, 3, generator=torch.Generator().manual_seed(1))
    v = _values(length=1)
    out = math_attention(q, k, v)
    assert torch.equal(out, v.expand(1, 2, 4, 3))


def test_equal_scores_average_the_values():
    v = _values(length=5)
    q, k = torch.zeros(1, 2, 3, 3), torch.zeros(1, 2, 5, 3)
    out = math_attention(q, k, v)
    torch.testing.assert_close(out, v.mean(dim=2, keepdim=True).expand(1, 2, 3, 3), rtol=0, atol=1e-6)


def test_zero_scale_averages_whatever_the_scores():
    q, k = torch.randn(1, 2, 3, 3), torch.randn(1, 2, 5, 3)
    v = _values(length=5)
    out = math_attention(q, k, v, scale=0.0)
    torch.testing.assert_close(out, v.mean(dim=2, keepdim=True).expand(1, 2, 3, 3), rtol=0, atol=1e-6)


def test_causal_row_i_averages_the_first_i_plus_one_values():
    v = _values(length=4)
    q, k = torch.zeros(1, 2, 4, 3), torch.zeros(1, 2, 4, 3)
    out = math_attention(q, k, v, is_causal=True)
    expected = torch.stack([v[:, :, : i + 1].mean(dim=2) for i in range(4)], dim=2)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)


def test_bool_mask_false_keys_are_ignored_and_float_minus_inf_is_the_same():
    v = _values(length=4)
    q, k = torch.zeros(1, 2, 1, 3), torch.zeros(1, 2, 4, 3)
    keep = torch.tensor([True, False, True, False])
    out_bool = math_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(out_bool, v[:, :, [0, 2]].mean(dim=2, keepdim=True), rtol=0, atol=1e-6)
    bias = torch.zeros(4).masked_fill(~keep, float("-inf"))
    assert torch.equal(math_attention(q, k, v, attn_mask=bias), out_bool)


def test_fully_masked_rows_are_zero_like_pytorch_sdpa():
    q, k, v = torch.randn(1, 1, 3, 4), torch.randn(1, 1, 5, 4), torch.randn(1, 1, 5, 4)
    keep = torch.ones(3, 5, dtype=torch.bool)
    keep[1] = False
    out = math_attention(q, k, v, attn_mask=keep)
    assert torch.equal(out[0, 0, 1], torch.zeros(4))
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))


@pytest.mark.parametrize("mask_kind", [None, "bool", "float", "causal"])
def test_matches_pytorch_math_sdpa_in_float64(mask_kind):
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(2, 3, 6, 33, generator=gen, dtype=torch.float64)
    k = torch.randn(2, 3, 6 if mask_kind == "causal" else 9, 33, generator=gen, dtype=torch.float64)
    v = torch.randn(k.shape[:-1] + (17,), generator=gen, dtype=torch.float64)  # value head dim may differ
    mask, causal = None, mask_kind == "causal"
    if mask_kind == "bool":
        mask = torch.rand(2, 1, 6, 9, generator=gen) > 0.4
        mask[..., 0] = True
    elif mask_kind == "float":
        mask = torch.randn(2, 3, 6, 9, generator=gen, dtype=torch.float64)
    with sdpa_kernel([SDPBackend.MATH]):
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=0.3)
    out = math_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=0.3)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


def test_low_precision_inputs_keep_their_dtype_and_are_computed_in_float32():
    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 2, 8, 16, generator=gen) for _ in range(3))
    out = math_attention(q.bfloat16(), k.bfloat16(), v.bfloat16())
    assert out.dtype == torch.bfloat16
    expected = math_attention(q.bfloat16().float(), k.bfloat16().float(), v.bfloat16().float()).bfloat16()
    assert torch.equal(out, expected)


def test_dropout_zeroes_some_probabilities_and_rescales_the_rest():
    torch.manual_seed(0)
    q, k = torch.zeros(1, 1, 200, 4), torch.zeros(1, 1, 50, 4)
    v = torch.ones(1, 1, 50, 4)
    out = math_attention(q, k, v, dropout_p=0.5)
    assert not torch.allclose(out, torch.ones_like(out))
    # Inverted dropout keeps the expectation: mean of rescaled kept weights times ones is ~1.
    assert abs(out.mean().item() - 1.0) < 0.05
