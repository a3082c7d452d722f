"""The glue around flash-attn and xformers (layout, bias, causal), checked on CPU with stand-ins.

The real kernels need CUDA (see test_kernels_agree.py, which runs them when CUDA is present).
Here each package is replaced by a stand-in that implements its documented calling convention
([batch, length, heads, head_dim] tensors) with PyTorch math, so transposes, mask conversion and
argument names of our wrappers are exercised everywhere.
"""

from __future__ import annotations

import sys
import types

import torch
import torch.nn.functional as F

from mixkit.attention.flash_attn_attention import flash_attn_attention
from mixkit.attention.math_attention import math_attention
from mixkit.attention.xformers_attention import _aligned_bias, xformers_attention


def _blhd_sdpa(q, k, v, mask=None, causal=False, scale=None):
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         attn_mask=mask, is_causal=causal, scale=scale)
    return out.transpose(1, 2)


def _qkv(lq=6, lk=6):
    gen = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, 3, length, 8, generator=gen) for length in (lq, lk, lk))


def test_xformers_wrapper_passes_layout_bias_and_causal(monkeypatch):
    class LowerTriangularMask:
        pass

    def memory_efficient_attention(q, k, v, attn_bias=None, p=0.0, scale=None):
        assert q.shape[1] == 6 and q.shape[2] == 3  # [B, L, H, D]
        if isinstance(attn_bias, LowerTriangularMask):
            return _blhd_sdpa(q, k, v, causal=True, scale=scale)
        if attn_bias is not None:
            assert attn_bias.stride(-2) % 8 == 0  # rows start 8-aligned
        return _blhd_sdpa(q, k, v, mask=attn_bias, scale=scale)

    ops = types.SimpleNamespace(memory_efficient_attention=memory_efficient_attention,
                                LowerTriangularMask=LowerTriangularMask)
    package = types.ModuleType("xformers")
    package.ops = ops
    monkeypatch.setitem(sys.modules, "xformers", package)
    monkeypatch.setitem(sys.modules, "xformers.ops", ops)
    q, k, v = _qkv()
    keep = torch.rand(2, 1, 6, 6, generator=torch.Generator().manual_seed(1)) > 0.5
    keep[..., 0] = True
    torch.testing.assert_close(xformers_attention(q, k, v, attn_mask=keep), math_attention(q, k, v, attn_mask=keep))
    torch.testing.assert_close(xformers_attention(q, k, v, is_causal=True, scale=0.5),
                               math_attention(q, k, v, is_causal=True, scale=0.5))


def test_aligned_bias_has_the_scores_shape_and_values():
    keep = torch.tensor([True, False, True]).expand(1, 1, 2, 3)
    bias = _aligned_bias(keep, (2, 4, 2, 3), torch.float32)
    assert bias.shape == (2, 4, 2, 3) and bias.stride(-2) == 8
    assert bias[1, 3].tolist() == [[0.0, float("-inf"), 0.0]] * 2


def test_flash_attn_wrapper_passes_layout_scale_and_causal(monkeypatch):
    seen = {}

    def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False):
        seen.update(shape=tuple(q.shape), dropout_p=dropout_p)
        return _blhd_sdpa(q, k, v, causal=causal, scale=softmax_scale)

    monkeypatch.setitem(sys.modules, "flash_attn", types.SimpleNamespace(flash_attn_func=flash_attn_func))
    monkeypatch.setattr("mixkit.attention.flash_attn_attention._use_flash_attn_3", lambda device: False)
    q, k, v = _qkv()
    out = flash_attn_attention(q, k, v, is_causal=True, scale=0.3)
    assert seen == {"shape": (2, 6, 3, 8), "dropout_p": 0.0}
    torch.testing.assert_close(out, math_attention(q, k, v, is_causal=True, scale=0.3))
