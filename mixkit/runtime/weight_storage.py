"""Keep weights in half precision and compute in float32, one layer at a time (the low-memory preset).

Why: on a CPU the weights are the memory. SDXL's UNet and text encoders are 13 GB in float32 and
6.7 GB in float16, and most shared checkpoints are float16 files anyway, so holding them as float16
loses nothing against the file while every matmul and convolution still runs in float32: each
linear, convolution and embedding layer gets a float32 copy of its weights just before its forward,
dropped right after, so a float32 copy exists for one layer at a time.

Built on diffusers' hook registry (its `ModelMixin.dtype` then reports float32, the compute dtype),
but not on its `LayerwiseCastingHook`: that one casts the module back after every call, which
allocates new storage for every weight. The loaded weights are often memory-mapped from the
safetensors file, and the first pass would then hold the mapped pages and the new copies together
(measured: 2x the weights at peak for SD 1.5). Here the stored tensors are never replaced.
"""

from __future__ import annotations

import functools

import torch

from mixkit.runtime.report import OptimizationReport

STORAGE_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
_SHORT_NAMES = {"float16": "fp16", "bfloat16": "bf16"}  # the infotext's `Optimization:` part: fp16-weights
CAST_HOOK = "layerwise_casting"  # diffusers' name: ModelMixin.dtype looks for it to report compute_dtype
_LAYERS = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose2d,
           torch.nn.Embedding)


@functools.cache  # one class, built on first use: importing diffusers is left to the first caller
def compute_hook_class():
    from diffusers.hooks.hooks import ModelHook

    class ComputeInFloat32Hook(ModelHook):
        """Swap the layer's half-precision tensors for float32 copies around its forward, then back."""

        _is_stateful = False

        def __init__(self, storage_dtype: torch.dtype, compute_dtype: torch.dtype) -> None:
            super().__init__()
            self.storage_dtype, self.compute_dtype = storage_dtype, compute_dtype

        def initialize_hook(self, module):
            for param in module.parameters(recurse=False):
                if param.is_floating_point() and param.dtype != self.storage_dtype:
                    param.data = param.data.to(self.storage_dtype)
            return module

        def pre_forward(self, module, *args, **kwargs):
            module._mixkit_stored = [(param, param.data) for param in module.parameters(recurse=False)]
            for param, stored in module._mixkit_stored:
                param.data = stored.to(self.compute_dtype)
            return args, kwargs

        def post_forward(self, module, output):
            for param, stored in module.__dict__.pop("_mixkit_stored", []):
                param.data = stored  # the very tensor that was stored: no new allocation, no rounding
            return output

    return ComputeInFloat32Hook


def store_weights_in(module: torch.nn.Module, storage: torch.dtype, compute: torch.dtype) -> int:
    """Linear/convolution/embedding weights held in `storage`, computed in `compute`; the rest in `compute`.

    Returns how many layers got the hook. Works on diffusers and transformers modules alike.
    Parameters are converted one by one, so the module never holds a second full copy of itself.
    """
    from diffusers.hooks import HookRegistry

    hook_class = compute_hook_class()
    hooked = 0
    for submodule in module.modules():
        if isinstance(submodule, _LAYERS) and not has_cast_hook(submodule):
            HookRegistry.check_if_exists_or_initialize(submodule).register_hook(hook_class(storage, compute), CAST_HOOK)
            hooked += 1
        elif not has_cast_hook(submodule):
            for tensor in list(submodule.parameters(recurse=False)) + list(submodule.buffers(recurse=False)):
                if tensor.is_floating_point() and tensor.dtype != compute:
                    tensor.data = tensor.data.to(compute)
    return hooked


def has_cast_hook(module: torch.nn.Module) -> bool:
    registry = getattr(module, "_diffusers_hook", None)
    return registry is not None and registry.get_hook(CAST_HOOK) is not None


def apply_weight_storage(model, storage_name: str, report: OptimizationReport) -> None:
    """Half-precision storage for the UNet, the VAE and every text encoder of a loaded model."""
    storage = STORAGE_DTYPES[storage_name]
    parts = [("UNet", model.unet), ("VAE", model.vae)] + [
        (f"text encoder {i + 1}", encoder) for i, encoder in enumerate(model.text_encoders)]
    layers = sum(store_weights_in(module, storage, torch.float32) for _, module in parts)
    report.step(f"weights stored in {storage_name}, computed in float32 layer by layer ({layers} layers: "
                f"{', '.join(name for name, _ in parts)})", label=f"{_SHORT_NAMES[storage_name]}-weights")
