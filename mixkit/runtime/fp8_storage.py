"""FP8 weight storage, as A1111's "FP8 weight" setting (`fp8_storage`): the linear and convolution layers of the UNet
and the text encoders hold their weights and biases as float8_e4m3fn and compute in the dtype they had, one layer at
a time; the VAE is left as it is (A1111 takes `first_stage_model` out before converting).

Why float8_e4m3fn: it is A1111's storage type (3 mantissa bits, range +-448, which SD weights stay well inside).
The upcast reuses the low-memory preset's hook (`mixkit.runtime.weight_storage`): a compute-dtype copy of a layer's
tensors exists only during its forward, and diffusers' `ModelMixin.dtype` still reports the compute dtype. A layer
the preset already stores in half precision keeps its hook; only what it stores becomes FP8.

`store_fp8` returns what `restore_fp8` needs to put the very tensors back (bit for bit: an X/Y/Z plot's "Disable"
cells and everything after the plot run on the model's own weights). Keeping them is the point of a comparison plot,
so this shows FP8's rounding, not its memory saving. Torch has no FP8 matmul on the CPU; none is needed, every layer
computes in its own dtype after the upcast.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from mixkit.forward_patches import has_foreign_forward, stamp_forward_change

FP8_DTYPE = getattr(torch, "float8_e4m3fn", None)
# `DiffusionModel.extras` key: the A1111 mode ("Enable", "Enable for SDXL") whose FP8 weights the model holds, which the
# infotext writes as `FP8 weight` (set and cleared by whoever stores them: the X/Y/Z plot's FP8 mode axis)
FP8_WEIGHT_EXTRA = "fp8_weight"
_LAYERS = (torch.nn.Linear, torch.nn.Conv2d)  # A1111's: isinstance(module, (Conv2d, Linear))


@dataclass
class Fp8Storage:
    """What `store_fp8` changed: each layer's tensors as they were, and the layers it gave a cast hook."""

    originals: list[tuple[torch.nn.Parameter, torch.Tensor]] = field(default_factory=list)
    hooked: list[torch.nn.Module] = field(default_factory=list)
    layers: list[torch.nn.Module] = field(default_factory=list)


def fp8_storage_problem(modules: list[torch.nn.Module]) -> str | None:
    """Why `modules` cannot store FP8 weights here (this torch has no float8_e4m3fn, or cannot convert to and from
    it on their device), or None when they can."""
    if FP8_DTYPE is None:
        return f"this torch ({torch.__version__}) has no float8_e4m3fn dtype (it needs torch 2.1 or newer)"
    for module in modules:
        layer = next((item for item in module.modules() if isinstance(item, _LAYERS)), None)
        if layer is None:
            continue
        weight = layer.weight
        try:
            torch.zeros(2, device=weight.device, dtype=weight.dtype).to(FP8_DTYPE).to(weight.dtype)
        except (RuntimeError, TypeError) as error:
            return f"torch cannot convert {weight.dtype} weights to float8_e4m3fn on {weight.device} ({error})"
    return None


def store_fp8(modules: list[torch.nn.Module]) -> Fp8Storage:
    """The linear and convolution layers of `modules` storing their weights (and biases) as float8_e4m3fn."""
    from diffusers.hooks import HookRegistry

    from mixkit.runtime.weight_storage import CAST_HOOK, compute_hook_class, has_cast_hook

    storage = Fp8Storage()
    hook_class = compute_hook_class()
    for module in modules:
        for layer in module.modules():
            if not isinstance(layer, _LAYERS):
                continue
            params = [param for param in layer.parameters(recurse=False) if param.is_floating_point()]
            storage.originals += [(param, param.data) for param in params]
            if has_cast_hook(layer):  # the low-memory preset's half-precision storage: its hook upcasts FP8 too
                for param in params:
                    param.data = param.data.to(FP8_DTYPE)
            else:  # the hook converts the layer's tensors as it is registered
                HookRegistry.check_if_exists_or_initialize(layer).register_hook(
                    hook_class(FP8_DTYPE, layer.weight.dtype), CAST_HOOK)
                storage.hooked.append(layer)
            storage.layers.append(layer)
            stamp_forward_change(layer)  # the prompt encoder's cache key: its text encoders now compute otherwise
    return storage


def restore_fp8(storage: Fp8Storage) -> None:
    """The layers `store_fp8` changed with their own tensors and hooks again."""
    from mixkit.runtime.weight_storage import CAST_HOOK

    for layer in storage.hooked:
        registry = layer._diffusers_hook
        registry.remove_hook(CAST_HOOK, recurse=False)
        if not registry.hooks:  # the registry was made for this hook: the layer as it was, its class's forward
            del layer._diffusers_hook
            if "forward" in layer.__dict__ and not has_foreign_forward(layer):
                del layer.__dict__["forward"]
    for param, data in storage.originals:
        param.data = data
    for layer in storage.layers:
        stamp_forward_change(layer)
    storage.originals.clear()
    storage.hooked.clear()
    storage.layers.clear()
