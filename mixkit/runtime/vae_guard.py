"""VAE decode in reduced precision with a NaN guard: fall back to fp32 for that image, never a black image.

SD 1.x/XL VAEs overflow in fp16 (activations above 65504 in the up-blocks; SDXL's VAE is the
famous case) and, more rarely, produce inf in bf16. The decode runs under autocast with the fp32
weights untouched, so the fallback is the exact fp32 decode rather than a re-cast copy, and the
weights cost no second copy in memory.
"""

from __future__ import annotations

import types

import torch

from mixkit.runtime.report import OptimizationReport

_ORIGINAL = "_mixkit_unguarded_decode"


def guarded_decode(decode, z, dtype: torch.dtype, device_type: str, report: OptimizationReport | None = None,
                   *args, **kwargs):
    """Run `decode(z)` under `dtype` autocast; if the result is not finite, decode again in fp32."""
    with torch.autocast(device_type, dtype=dtype):
        output = decode(z, *args, **kwargs)
    sample = output.sample if hasattr(output, "sample") else output[0]
    if torch.isfinite(sample).all():
        if hasattr(output, "sample"):
            output.sample = sample.float()
        return output
    if report is not None:
        report.nan_fallbacks += 1
        report.fallback(f"VAE decode in {dtype} gave NaN/inf; decoded this image again in float32")
    return decode(z.float(), *args, **kwargs)


def install_vae_guard(vae: torch.nn.Module, dtype: torch.dtype, report: OptimizationReport | None = None) -> None:
    """Make `vae.decode` decode under `dtype` with the fp32 fallback (undo with `remove_vae_guard`).

    An instance attribute shadows the class method, so `decode_latents(vae, ...)` and any other
    caller go through the guard without knowing about it.
    """
    remove_vae_guard(vae)
    original = vae.decode
    device_type = vae.device.type

    def decode(self, z, *args, **kwargs):
        return guarded_decode(original, z, dtype, device_type, report, *args, **kwargs)

    vae.decode = types.MethodType(decode, vae)
    vae.__dict__[_ORIGINAL] = original


def remove_vae_guard(vae: torch.nn.Module) -> None:
    if _ORIGINAL in vae.__dict__:
        del vae.__dict__["decode"]
        del vae.__dict__[_ORIGINAL]
