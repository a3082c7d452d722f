"""Keep weights in half precision and compute in float32, one layer at a time (the low-memory preset).

Why: on a CPU the weights are the memory. SDXL's UNet and text encoders are 13 GB in float32 and
6.7 GB in float16, and most shared checkpoints are float16 files anyway, so holding them as float16
loses nothing against the file while every matmul and convolution still runs in float32: each
linear or convolution layer is cast up just before its forward and back right after (diffusers'
layerwise-casting hook, so the float32 copy exists for one layer at a time). The float16 -> float32
-> float16 round trip is exact, so repeated generations do not drift. Everything else (norms,
embeddings, biases of other layers) is small and is held in float32.
"""

from __future__ import annotations

import torch

from mixkit.runtime.report import OptimizationReport

STORAGE_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
_CAST_HOOK = "layerwise_casting"


def store_weights_in(module: torch.nn.Module, storage: torch.dtype, compute: torch.dtype) -> int:
    """Linear/convolution weights held in `storage`, cast to `compute` per forward; the rest in `compute`.

    Returns how many layers got the casting hook. Works on diffusers and transformers modules alike.
    Parameters outside the hooked layers are converted one by one, so the module never holds a
    second full-precision copy of itself.
    """
    from diffusers.hooks import apply_layerwise_casting

    # An empty pattern tuple: no layer is skipped (diffusers' "auto" skips norms and proj_in/out,
    # which matters for its float8 storage, not for float16).
    apply_layerwise_casting(module, storage_dtype=storage, compute_dtype=compute, skip_modules_pattern=())
    hooked = 0
    for submodule in module.modules():
        if _has_cast_hook(submodule):
            hooked += 1
            continue
        for name, tensor in list(submodule.named_parameters(recurse=False)) + list(submodule.named_buffers(recurse=False)):
            if tensor.is_floating_point() and tensor.dtype != compute:
                tensor.data = tensor.data.to(compute)
    return hooked


def _has_cast_hook(module: torch.nn.Module) -> bool:
    registry = getattr(module, "_diffusers_hook", None)
    return registry is not None and registry.get_hook(_CAST_HOOK) is not None


def apply_weight_storage(model, storage_name: str, report: OptimizationReport) -> None:
    """Half-precision storage for the UNet, the VAE and every text encoder of a loaded model."""
    storage = STORAGE_DTYPES[storage_name]
    parts = [("UNet", model.unet), ("VAE", model.vae)] + [
        (f"text encoder {i + 1}", encoder) for i, encoder in enumerate(model.text_encoders)]
    layers = sum(store_weights_in(module, storage, torch.float32) for _, module in parts)
    report.step(f"weights stored in {storage_name}, computed in float32 layer by layer ({layers} layers: "
                f"{', '.join(name for name, _ in parts)})")
