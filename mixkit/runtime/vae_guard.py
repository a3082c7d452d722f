"""VAE decode in reduced precision with a NaN guard: fall back to fp32 for that image, never a black image.

SD 1.x/XL VAEs overflow in fp16 (activations above 65504 in the up-blocks; SDXL's VAE is the
famous case) and, more rarely, produce inf in bf16. The decode runs under autocast with the fp32
weights untouched, so the fallback is the exact fp32 decode rather than a re-cast copy, and the
weights cost no second copy in memory.

The guard is a `ForwardPatch` on `vae.decode`: it stacks with other decode patches (TAESD, a test's spy) in any order,
and removing it takes out only itself.
"""

from __future__ import annotations

import torch

from mixkit.forward_patches import install_forward_patch
from mixkit.runtime.report import OptimizationReport

_GUARD = "_mixkit_vae_guard"
REDUCED_DTYPES = (torch.float16, torch.bfloat16)


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


def check_vae_guard_inputs(vae, dtype) -> None:
    """Refuse a module without `decode` and a dtype the guard has no reason to run in, before anything changes."""
    if not isinstance(vae, torch.nn.Module) or not callable(getattr(type(vae), "decode", None)):
        raise TypeError(f"the VAE guard needs a VAE module with a decode method (diffusers' AutoencoderKL), "
                        f"got {type(vae).__name__}")
    if dtype not in REDUCED_DTYPES:
        raise ValueError(f"the VAE guard decodes in reduced precision: dtype must be one of "
                         f"{[str(d) for d in REDUCED_DTYPES]}, got {dtype!r}; for float32 install no guard")


def install_vae_guard(vae: torch.nn.Module, dtype: torch.dtype, report: OptimizationReport | None = None) -> None:
    """Make `vae.decode` decode under `dtype` with the fp32 fallback (undo with `remove_vae_guard`); a guard installed
    before is replaced, other decode patches stay.

    An instance attribute shadows the class method, so `decode_latents(vae, ...)` and any other
    caller go through the guard without knowing about it.
    """
    check_vae_guard_inputs(vae, dtype)
    remove_vae_guard(vae)
    device_type = vae.device.type

    def decode(below, z, *args, **kwargs):
        return guarded_decode(below, z, dtype, device_type, report, *args, **kwargs)

    vae.__dict__[_GUARD] = install_forward_patch(vae, decode, "VAE NaN guard", attribute="decode")


def remove_vae_guard(vae: torch.nn.Module) -> bool:
    """Take the guard out of `vae.decode`, leaving decode patches stacked above or below it; False if none was
    installed."""
    patch = vae.__dict__.pop(_GUARD, None)
    if patch is None:
        return False
    patch.remove()
    return True
