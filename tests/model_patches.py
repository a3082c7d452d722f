"""What has been patched onto a loaded model's modules: instance `forward` (and a VAE's `decode` / `encode`) attributes
and hooks. tests/conftest.py compares it before and after every test on the shared models (`sd1_pipe`, `sd1_model`
...), so a test (or a pipeline call) that leaves a spy, a wrapper or a hook behind fails itself instead of changing
later tests."""

from __future__ import annotations

import torch

HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
GLOBAL_HOOK_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                     "_global_backward_pre_hooks")
# transformers installs these on a text encoder's layers at its first call and keeps them, by design
# (transformers.utils.output_capturing.maybe_install_capturing_hooks): part of the loaded model, not a patch
_OWN_HOOK_MODULES = ("transformers.utils.output_capturing",)


# methods mixkit or a test replaces on an instance: a forward (spies, runtime LoRA ...), a VAE's decode (NaN guard,
# TAESD, decode spies) and encode
PATCHED_METHODS = ("forward", "decode", "encode")


def model_modules(model) -> list[tuple[str, torch.nn.Module]]:
    """The torch modules of a `DiffusionModel`, of a mixkit pipeline (its `.model`) or of a diffusers pipeline: the
    UNet, the VAE and every text encoder, by name; a backend's stand-in for one (OpenVINO's UNet and VAE graphs) too,
    as forward patches go on those as well (DeepCache, TAESD)."""
    model = getattr(model, "model", model)
    roots = [(name, getattr(model, name, None)) for name in ("unet", "vae")]
    encoders = getattr(model, "text_encoders", None)
    if encoders is None:  # a diffusers pipeline
        encoders = [getattr(model, name, None) for name in ("text_encoder", "text_encoder_2")]
    roots += [(f"text_encoders[{index}]", encoder) for index, encoder in enumerate(encoders)]
    return [(name, module) for name, module in roots if isinstance(module, torch.nn.Module) or _is_standin(module)]


def _is_standin(part) -> bool:
    """A backend's stand-in for a model part: an object of its own with a patchable method, not a torch module."""
    return (part is not None and hasattr(part, "__dict__") and not isinstance(part, (list, tuple, dict))
            and any(callable(getattr(type(part), method, None)) for method in PATCHED_METHODS))


def _named_parts(module) -> list[tuple[str, object]]:
    return list(module.named_modules()) if isinstance(module, torch.nn.Module) else [("", module)]


def model_patches(model) -> dict[tuple, tuple]:
    """{(where, kind, key): (holder, key)} for every instance method of `PATCHED_METHODS` and every hook on `model`'s
    modules and the global module hooks; the value is what `remove_patches` deletes."""
    found = {}
    for root, module in model_modules(model):
        for name, sub in _named_parts(module):
            where = f"{root}.{name}" if name else root
            for method in PATCHED_METHODS:
                if method in sub.__dict__:
                    found[(where, method, id(sub.__dict__[method]))] = (sub.__dict__, method)
            for kind in HOOK_DICTS:
                for key, hook in getattr(sub, kind, {}).items():
                    if getattr(hook, "__module__", None) not in _OWN_HOOK_MODULES:
                        found[(where, kind, key)] = (getattr(sub, kind), key)
    for kind in GLOBAL_HOOK_DICTS:
        hooks = getattr(torch.nn.modules.module, kind, {})
        for key in hooks:
            found[("torch.nn.modules.module", kind, key)] = (hooks, key)
    return found


def describe(patches: dict[tuple, tuple]) -> str:
    return ", ".join(f"{kind} on {where}" for where, kind, _ in sorted(patches, key=str))


def remove_patches(patches: dict[tuple, tuple]) -> None:
    """Take these patches off again (an instance method is deleted, so the class's method applies)."""
    for holder, key in patches.values():
        holder.pop(key, None)
