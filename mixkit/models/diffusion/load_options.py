"""The options a diffusion model load may be given, checked before any file is read or downloaded.

A bad option found late costs the whole load (tens of seconds for SDXL) and surfaces as some library's
error in its own terms: diffusers reads a dtype string as "not a torch.dtype, defaulting to float32" and
loads twice the memory asked for; torch reports a missing GPU as a bare "Torch not compiled with CUDA
enabled" after every weight was read. `load_diffusion_model` runs these checks first.
"""

from __future__ import annotations

import re
from typing import Any

# The precisions SD weights are loaded in: torch's names and the short ones kohya / A1111 users type.
LOAD_DTYPE_NAMES = {"float32": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16",
                    "bfloat16": "bfloat16", "bf16": "bfloat16"}
# The device types torch knows and mixkit can run on; torch also parses others (meta, hpu ...) that cannot hold weights.
RUNNABLE_DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu")
# diffusers' variant names sit between the weight name and its extension (`diffusion_pytorch_model.fp16.safetensors`).
VARIANT_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def check_load_dtype(dtype: Any, name: str = "dtype"):
    """`dtype` as a torch.dtype: torch.float32/float16/bfloat16 or their names ("float16", "fp16", "bf16" ...).

    Other dtypes are refused, float64 too: diffusers and the samplers assume a half or single precision UNet,
    and an integer dtype would be read as a corrupt checkpoint deep inside the loaders.
    """
    import torch

    allowed = (torch.float32, torch.float16, torch.bfloat16)
    if isinstance(dtype, str) and dtype in LOAD_DTYPE_NAMES:
        return getattr(torch, LOAD_DTYPE_NAMES[dtype])
    if isinstance(dtype, torch.dtype) and dtype in allowed:
        return dtype
    raise TypeError(f"{name}={dtype!r} is not a precision SD weights load in; pass torch.float32 (the default), "
                    "torch.float16 or torch.bfloat16, or their names 'float32', 'float16'/'fp16', 'bfloat16'/'bf16'.")


def check_device(device: Any) -> str | None:
    """`device` as a string if this machine can hold weights on it (None: stay on the CPU), else ValueError.

    Checked with torch's own availability queries, so a missing GPU is named before the load, with what to
    install or pass, not after it as torch's "Torch not compiled with CUDA enabled" AssertionError.
    """
    if device is None:
        return None
    import torch

    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a string such as 'cpu', 'cuda' or 'cuda:1', or a torch.device, got {device!r}")
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device={device!r} is not a device name; use 'cpu', 'cuda', 'cuda:N', 'mps' or 'xpu'") from None
    if parsed.type not in RUNNABLE_DEVICE_TYPES:
        raise ValueError(f"device={device!r}: mixkit runs on {', '.join(RUNNABLE_DEVICE_TYPES)}, not {parsed.type}; "
                         "use device='cpu'")
    if parsed.type != "cpu":
        _check_accelerator(parsed, str(device))
    return str(parsed)


def _check_accelerator(parsed, asked: str) -> None:
    import torch

    kind = parsed.type
    if kind == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(f"device={asked!r}: this PyTorch build or machine has no usable MPS (Apple GPU) device; "
                             "use device='cpu'")
        return
    backend = getattr(torch, kind, None)
    if backend is None or not backend.is_available():
        if kind == "cuda" and torch.version.cuda is None:
            reason = (f"this PyTorch ({torch.__version__}) is a build without CUDA; install a CUDA build of PyTorch "
                      "(pytorch.org/get-started, e.g. `pip install torch --index-url https://download.pytorch.org/whl/cu128`)")
        else:
            reason = f"no {kind.upper()} device is visible (check the driver and {kind.upper()}_VISIBLE_DEVICES)"
        raise ValueError(f"device={asked!r}: {reason}, or pass device='cpu'")
    count = backend.device_count()
    if parsed.index is not None and parsed.index >= count:
        raise ValueError(f"device={asked!r}: this machine has {count} {kind.upper()} device(s), numbered "
                         f"{kind}:0 to {kind}:{count - 1}")


def check_variant(variant: Any) -> str | None:
    """A diffusers weight variant name ("fp16", "ema", ...) or None (the plain weights)."""
    if variant is None:
        return None
    if not isinstance(variant, str) or not VARIANT_NAME.match(variant):
        raise ValueError(f"variant={variant!r} is not a weight variant name; pass e.g. variant='fp16' (the files "
                         "`*.fp16.safetensors`), or None for the plain weights")
    return variant


def check_use_safetensors(use_safetensors: Any) -> bool | None:
    """None (safetensors first, .bin when a component has no safetensors) or True (safetensors or an error).

    False, diffusers' "load the pickles although safetensors exist", is refused: mixkit reads a pickle only
    when there is no safetensors file, and then only with torch's weights-only loader.
    """
    if use_safetensors is None or use_safetensors is True:
        return use_safetensors
    if use_safetensors is False:
        raise ValueError("use_safetensors=False is not supported: mixkit always loads a component's .safetensors "
                         "weights when it has them (.bin only when it has none); drop the argument")
    raise TypeError(f"use_safetensors must be True or None, got {use_safetensors!r}")
