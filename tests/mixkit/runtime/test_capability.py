import pytest
import torch

from mixkit.runtime.capability import choose_fast_precision, cpu_has_native_bf16


@pytest.mark.parametrize("flags, expected", [
    ({"avx2", "avx512f", "avx512_bf16"}, "bfloat16"),
    ({"avx2", "amx_bf16", "amx_tile"}, "bfloat16"),
    ({"avx2", "avx512f"}, "float32"),
    (set(), "float32"),
])
def test_cpu_precision_follows_bf16_flags(flags, expected):
    choice = choose_fast_precision("cpu", flags=frozenset(flags))
    assert choice.dtype_name == expected
    assert choice.is_fallback == (expected == "float32")
    assert cpu_has_native_bf16(frozenset(flags)) == (expected == "bfloat16")


def test_cpu_fallback_says_why():
    choice = choose_fast_precision("cpu", flags=frozenset({"avx2"}))
    assert "AVX512-BF16" in choice.reason and "fp32" in choice.reason


@pytest.mark.parametrize("bf16, expected", [(True, "bfloat16"), (False, "float16")])
def test_cuda_prefers_bf16_else_fp16(bf16, expected):
    assert choose_fast_precision("cuda", cuda_bf16=bf16).dtype_name == expected


def test_cpu_bf16_autocast_only_where_the_cpu_has_native_bf16(monkeypatch):
    # Emulated bf16 convolutions were ~100x slower than fp32 on an AVX-512 CPU without AVX512-BF16.
    from mixkit.runtime import capability

    monkeypatch.setattr(capability, "cpu_flags", lambda: frozenset({"avx2", "avx512f"}))
    with capability.cpu_bf16_autocast():
        assert not torch.is_autocast_enabled("cpu")
    monkeypatch.setattr(capability, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    with capability.cpu_bf16_autocast():
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    with capability.cpu_bf16_autocast(False):
        assert not torch.is_autocast_enabled("cpu")
