"""What the machine can run fast: which reduced precision pays off on which device.

bf16 is only a speed-up on CPUs with native bf16 instructions (AVX512-BF16 or AMX); elsewhere
PyTorch emulates it and it runs slower than fp32, so the fast path must check before choosing it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


@dataclass(frozen=True)
class PrecisionChoice:
    """The compute dtype chosen for a device, and why (shown to the user when it is a fallback)."""

    dtype_name: str  # "bfloat16" | "float16" | "float32"
    reason: str
    is_fallback: bool = False

    @property
    def dtype(self):
        import torch

        return getattr(torch, self.dtype_name)


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU feature flags of /proc/cpuinfo (empty where that file does not exist, e.g. macOS)."""
    path = Path("/proc/cpuinfo")
    try:
        text = path.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def cpu_has_native_bf16(flags: frozenset[str] | None = None) -> bool:
    """True when the CPU has AVX512-BF16 or AMX-BF16 (the only CPUs where bf16 beats fp32)."""
    flags = cpu_flags() if flags is None else flags
    return any(flag in flags for flag in BF16_CPU_FLAGS)


def cpu_bf16_autocast(requested: bool = True):
    """`torch.autocast` to bf16 on CPUs with native bf16, else a disabled one (the code then runs in fp32).

    Elsewhere oneDNN emulates bf16: a 3x3 convolution over 4x128x64x64 took 10.9 s in bf16 against 0.11 s in
    fp32 on an AVX-512 CPU without AVX512-BF16 (2026-11-27), so the tiny recipes' bf16 autocast made a training
    step ~100x slower there.
    """
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(requested) and cpu_has_native_bf16())


def choose_fast_precision(device_type: str, *, flags: frozenset[str] | None = None,
                          cuda_bf16: bool | None = None) -> PrecisionChoice:
    """The reduced precision the fast preset uses on `device_type`, with a fallback to fp32."""
    if device_type == "cpu":
        if cpu_has_native_bf16(flags):
            return PrecisionChoice("bfloat16", "CPU has AVX512-BF16/AMX")
        return PrecisionChoice("float32", "this CPU has neither AVX512-BF16 nor AMX-BF16, where bf16 is "
                               "emulated and slower than fp32; staying in fp32", is_fallback=True)
    if device_type == "cuda":
        if cuda_bf16 is None:
            import torch

            cuda_bf16 = torch.cuda.is_bf16_supported()
        if cuda_bf16:
            return PrecisionChoice("bfloat16", "GPU supports bf16 (no fp16 overflow risk)")
        return PrecisionChoice("float16", "GPU lacks fast bf16 (pre-Ampere); using fp16")
    if device_type in ("mps", "xpu"):
        return PrecisionChoice("float16", f"{device_type} runs fp16 natively")
    return PrecisionChoice("float32", f"no known fast reduced precision on device {device_type!r}; staying in fp32",
                           is_fallback=True)
