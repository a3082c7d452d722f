"""Mask conversions: bool <-> additive, and the causal pattern's alignment."""

from __future__ import annotations

import torch

from mixkit.attention.masks import additive_mask, causal_bool_mask


def test_causal_mask_is_top_left_aligned_like_sdpa():
    assert causal_bool_mask(2, 4, torch.device("cpu")).tolist() == [[True, False, False, False],
                                                                     [True, True, False, False]]


def test_additive_mask_turns_false_into_minus_inf_and_keeps_floats():
    keep = torch.tensor([[True, False], [False, True]])
    assert additive_mask(keep, torch.float32).tolist() == [[0.0, float("-inf")], [float("-inf"), 0.0]]
    bias = torch.tensor([[0.5, -2.0]], dtype=torch.float64)
    out = additive_mask(bias, torch.bfloat16)
    assert out.dtype == torch.bfloat16 and out.tolist() == [[0.5, -2.0]]
