"""Put a DiffusionModel back exactly as it was when `apply_runtime` fails half-way.

Why a snapshot of module state rather than one undo function per step: every step of
`apply_runtime` changes modules through their own attributes (parameter tensors swapped by a cast
or a layout change, parameters replaced by fused views, submodules added, processors and VAE flags
set, forward hooks and wrapped `forward`s installed, accelerate's `_hf_hook`), and all of those
live in each module's `__dict__` or in the tensor a `Parameter` holds. Copying every module's
`__dict__` one level deep (its dicts: `_parameters`, `_modules`, the hook tables) and keeping a
reference to each parameter's and buffer's tensor restores all of it, including what a future step
adds, without a step being able to forget its undo.

Cost: references only, no tensor is copied. While `apply_runtime` runs, a step that casts weights
(`fast` on a model loaded in float32) keeps the old tensors alive next to the new ones until it
returns; load with `load_options_for(preset)` and there is no cast.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import torch

# nn.Module's own tables (`_parameters`, `_modules`, the hook tables) are plain dicts or OrderedDicts;
# subclasses such as diffusers' FrozenDict config are immutable and kept as they are.
_TABLES = (dict, OrderedDict)


def _copied(value):
    return value.copy() if type(value) in _TABLES else value


@dataclass
class _ModuleState:
    module: torch.nn.Module
    attributes: dict
    tensors: list[tuple[torch.Tensor, torch.Tensor]]  # (parameter or buffer, the tensor it held)


def _module_state(module: torch.nn.Module) -> _ModuleState:
    attributes = {key: _copied(value) for key, value in module.__dict__.items()}
    tensors = [(tensor, tensor.data) for tensor in
               list(module._parameters.values()) + list(module._buffers.values()) if tensor is not None]
    return _ModuleState(module, attributes, tensors)


@dataclass
class ModelSnapshot:
    """The state of a DiffusionModel's parts and of every module inside them; `restore()` brings it back."""

    model: object
    parts: dict = field(default_factory=dict)  # unet, vae, text_encoders, extras as they were
    modules: list[_ModuleState] = field(default_factory=list)

    def restore(self) -> None:
        for state in self.modules:
            state.module.__dict__.clear()
            state.module.__dict__.update({key: _copied(value) for key, value in state.attributes.items()})
            for tensor, data in state.tensors:
                tensor.data = data
        self.model.unet, self.model.vae = self.parts["unet"], self.parts["vae"]
        self.model.text_encoders = list(self.parts["text_encoders"])
        self.model.extras.clear()
        self.model.extras.update(self.parts["extras"])


def snapshot_model(model) -> ModelSnapshot:
    """Record `model`'s UNet, VAE and text encoders (every submodule) and its `extras`."""
    parts = {"unet": model.unet, "vae": model.vae, "text_encoders": list(model.text_encoders),
             "extras": dict(model.extras)}
    seen: set[int] = set()
    modules = []
    for root in [model.unet, model.vae, *model.text_encoders]:
        if not isinstance(root, torch.nn.Module):
            continue
        for module in root.modules():
            if id(module) not in seen:
                seen.add(id(module))
                modules.append(_module_state(module))
    return ModelSnapshot(model, parts, modules)
