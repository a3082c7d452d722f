"""What has been patched onto a loaded model's modules: instance `forward` attributes and forward hooks. The
pipelines' conftest compares it before and after every test on the shared models (`sd1_pipe`, `sd1_model` ...), so a
test (or a pipeline call) that leaves a spy, a wrapper or a hook behind fails itself instead of changing later tests."""

from __future__ import annotations

import torch

HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
GLOBAL_HOOK_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                     "_global_backward_pre_hooks")
# transformers installs these on a text encoder's layers at its first call and keeps them, by design
# (transformers.utils.output_capturing.maybe_install_capturing_hooks): part of the loaded model, not a patch
_OWN_HOOK_MODULES = ("transformers.utils.output_capturing",)


def model_modules(model) -> list[tuple[str, torch.nn.Module]]:
    """The torch modules of a `DiffusionModel`: the UNet, the VAE and every text encoder, by name."""
    roots = [("unet", model.unet), ("vae", model.vae)]
    roots += [(f"text_encoders[{index}]", encoder) for index, encoder in enumerate(model.text_encoders)]
    return roots


def model_patches(model) -> dict[tuple, tuple]:
    """{(where, kind, key): (holder, key)} for every instance `forward` and every hook on `model`'s modules and the
    global module hooks; the value is what `remove_patches` deletes."""
    found = {}
    for root, module in model_modules(model):
        for name, sub in module.named_modules():
            where = f"{root}.{name}" if name else root
            if "forward" in sub.__dict__:
                found[(where, "forward", id(sub.__dict__["forward"]))] = (sub.__dict__, "forward")
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
    """Take these patches off again (an instance forward is deleted, so the class's forward applies)."""
    for holder, key in patches.values():
        holder.pop(key, None)
