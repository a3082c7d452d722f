"""Match every module of a LoRA file to the model, or fail with one error naming every bad key.

Nothing is applied here: `apply_loras` matches all requested files first, so a mismatch leaves the
model untouched. A file for another base model (SDXL on SD 1.x, SD 2.x on SD 1.x) shows up as
missing components, unknown modules or wrong shapes; the error adds what the file looks like it
was trained for, judged from its own keys and shapes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from torch import nn

from mixkit.lora.algorithms import LORA_ALGORITHMS
from mixkit.lora.errors import LoraMismatchError, list_for_humans
from mixkit.lora.lora_file import LoraFile, LoraModule
from mixkit.lora.model_index import COMPONENT_LABELS, TE2, ModelIndex, TargetModule

# Module types whose forward runtime mode knows how to recompute with changed parameters.
RUNTIME_MODULE_TYPES = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.GroupNorm, nn.LayerNorm)
# Width of the text-encoder context each base model's cross-attention reads.
_CONTEXT_WIDTHS = {768: "SD 1.x", 1024: "SD 2.x", 2048: "SDXL"}


@dataclass(frozen=True)
class MatchedModule:
    target: TargetModule
    lora_module: LoraModule
    # The file's change covers the first 4 input channels of a 9-channel (inpainting) or 8-channel (instruct-pix2pix)
    # conv_in: the rest is zero.
    pad_inputs_to: int | None = None


def _known_algorithms() -> str:
    return ", ".join(LORA_ALGORITHMS.get(name).label for name in LORA_ALGORITHMS.names()) + ", DoRA of each"


def _key_of(module: LoraModule) -> str:
    return module.weights.keys[0].split(".")[0] if module.weights.keys else module.name


def guess_base_model(lora: LoraFile) -> str | None:
    """What the file was trained for, from a second text encoder or the cross-attention input width."""
    if any(m.component == TE2 for m in lora.modules):
        return "SDXL"
    widths = set()
    for module in lora.modules:
        if module.name.replace(".", "_").endswith(("attn2_to_k", "attn2_to_v")) and module.weights.problem() is None:
            widths.add(module.weights.implied_shape()[1])
    guesses = {_CONTEXT_WIDTHS[w] for w in widths if w in _CONTEXT_WIDTHS}
    if len(guesses) == 1:
        return guesses.pop()
    return lora.metadata.architecture or None


def _inpaint_padding(module: LoraModule, weight, want_in: int) -> int | None:
    """9 when a change made for a 4-channel conv_in meets an inpainting UNet's 9-channel one (latents + mask +
    masked image): A1111's `network_apply_weights` zero-pads such a change, so an SD LoRA works on the
    inpainting model. 8 likewise for an instruct-pix2pix UNet (latents + input image), where A1111 pads nothing
    and fails on the layer: the same zero padding leaves the image channels as the model has them. Only changes
    that do not depend on the weight can be padded (A1111 fails on the others)."""
    channels = weight.shape[1] if weight.dim() == 4 else 0
    if channels not in (8, 9) or want_in * channels != int(math.prod(weight.shape[1:])) * 4:
        return None
    return channels if module.weights.additive else None


def _pointwise_alike(layout, weight) -> bool:
    """A 2-D (Linear) LoRA tensor on a 1x1 Conv, or a [r, in, 1, 1] one on a Linear: the same numbers for a pointwise
    layer, which A1111 (`network_lora.create_module` reshapes the tensor to the layer's layout) and ComfyUI apply.
    Trainers write either for SD 1.x's 1x1 `proj_in` / `proj_out` (SD 2.x and SDXL have Linear ones there)."""
    if weight.dim() == 4 and layout.dim() == 2:
        return tuple(weight.shape[2:]) == (1, 1)
    if weight.dim() == 2 and layout.dim() == 4:
        return tuple(layout.shape[2:]) == (1, 1)
    return False


def _shape_problem(module: LoraModule, target: TargetModule) -> str | None:
    weight = getattr(target.module, "weight", None)
    if weight is None:
        return f"{_key_of(module)}: target {target.path} has no weight"
    out_dim, in_flat = weight.shape[0], int(math.prod(weight.shape[1:]))
    want_out, want_in = module.weights.implied_shape()
    if (want_out not in (-1, out_dim)) or (want_in not in (-1, in_flat) and not _inpaint_padding(module, weight, want_in)):
        return f"{_key_of(module)}: file [{want_out}, {want_in}] vs model {target.path} {list(weight.shape)}"
    layout = module.weights.layout_tensor()
    if layout is not None and layout.dim() != weight.dim() and not _pointwise_alike(layout, weight):
        return (f"{_key_of(module)}: file has a {layout.dim()}-D ({'Linear' if layout.dim() == 2 else 'Conv'}) "
                f"tensor {list(layout.shape)} for {type(target.module).__name__} {target.path} {list(weight.shape)}")
    magnitude = module.weights.peft_magnitude
    if magnitude is not None and magnitude.numel() != weight.shape[0]:
        return f"{_key_of(module)}.lora_magnitude_vector: {list(magnitude.shape)} is not one value per output of {list(weight.shape)}"
    if module.weights.dora_scale is not None and module.weights.dora_scale.numel() not in (weight.shape[0], weight.shape[1]):
        return f"{_key_of(module)}.dora_scale: {list(module.weights.dora_scale.shape)} fits neither side of {list(weight.shape)}"
    if module.weights.bias_change(1.0) is not None:
        bias = getattr(target.module, "bias", None)
        if bias is None or bias.numel() != module.weights.bias_change(1.0).numel():
            return f"{_key_of(module)}: bias change for {target.path}, which has {'no bias' if bias is None else list(bias.shape)}"
    return None


@dataclass
class MatchResult:
    matched: list[MatchedModule]
    unmatched: list[str]
    shape_problems: list[str]
    missing_components: set[str]
    # Modules whose own tensors do not fit together, or use a variant mixkit does not apply (named in the text).
    broken: list[str] = field(default_factory=list)
    # Keys of the file no LoRA algorithm claims (part of `unmatched`).
    unrecognised: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return self.broken + sorted(self.unmatched) + self.shape_problems


def find_matches(lora: LoraFile, index: ModelIndex, *, runtime: bool = False) -> MatchResult:
    """Sort every module of `lora` into matched, unmatched and mismatched, without raising."""
    matched: list[MatchedModule] = []
    unmatched = list(lora.unclaimed_keys)
    shapes: list[str] = []
    missing_components: set[str] = set()
    claimed: dict[int, str] = {}
    broken: list[str] = []
    for module in lora.modules:
        inner = module.weights.problem()
        if inner is not None:
            broken.append(f"{_key_of(module)} ({module.weights.spec.label}): {inner}")
            continue
        if not index.has(module.component):
            missing_components.add(module.component)
            unmatched.append(_key_of(module))
            continue
        target = lora.format.find(index, module.component, module.name)
        if target is None:
            unmatched.append(_key_of(module))
            continue
        problem = _shape_problem(module, target)
        if problem is None and runtime and not isinstance(target.module, RUNTIME_MODULE_TYPES):
            problem = f"{_key_of(module)}: runtime mode cannot patch a {type(target.module).__name__}; use mode='merge'"
        if problem is None and id(target.module) in claimed:
            # Two names for one module (e.g. diffusers and LDM naming mixed) would apply it twice.
            problem = f"{_key_of(module)} and {claimed[id(target.module)]} both target {target.path}"
        if problem:
            shapes.append(problem)
            continue
        claimed[id(target.module)] = _key_of(module)
        want_in, weight = module.weights.implied_shape()[1], target.module.weight
        padding = _inpaint_padding(module, weight, want_in) if want_in not in (-1, int(math.prod(weight.shape[1:]))) else None
        matched.append(MatchedModule(target, module, padding))
    return MatchResult(matched, unmatched, shapes, missing_components, broken, list(lora.unclaimed_keys))


def match_lora(lora: LoraFile, index: ModelIndex, *, runtime: bool = False) -> list[MatchedModule]:
    """Every module of `lora` with its target in the model; LoraMismatchError listing all problems otherwise."""
    result = find_matches(lora, index, runtime=runtime)
    unmatched, shapes, missing_components = result.unmatched, result.shape_problems, result.missing_components
    if not unmatched and not shapes and not result.broken:
        return result.matched
    if not shapes and set(unmatched) <= set(result.unrecognised):
        # The base model is not in question: the file itself is malformed or uses an unsupported algorithm.
        parts = [f"LoRA {lora.path} cannot be applied."]
        if result.broken:
            parts.append(f"{len(result.broken)} module(s) are malformed or use a variant mixkit does not apply: "
                         f"{list_for_humans(result.broken, 6)}.")
        if unmatched:
            parts.append(f"{len(unmatched)} key(s) belong to no LoRA algorithm mixkit applies ({_known_algorithms()}): "
                         f"{list_for_humans(sorted(unmatched))}.")
        parts.append("Re-export the LoRA with a supported algorithm, or re-download it if it is damaged; "
                     "the model was left unchanged.")
        raise LoraMismatchError(" ".join(parts), problems=result.problems)
    parts = [f"LoRA {lora.path} does not fit this model ({index.family_label()})."]
    guess = guess_base_model(lora)
    if guess:
        parts.append(f"The file looks trained for {guess}.")
    for component in sorted(missing_components):
        parts.append(f"It has weights for the {COMPONENT_LABELS[component]}, which this model does not have.")
    if unmatched:
        parts.append(f"{len(unmatched)} key(s) match no module: {list_for_humans(sorted(unmatched))}.")
    if shapes:
        parts.append(f"{len(shapes)} shape mismatch(es) or conflicts: {list_for_humans(shapes, 6)}.")
    if result.broken:
        parts.append(f"{len(result.broken)} module(s) are malformed or unsupported: {list_for_humans(result.broken, 6)}.")
    parts.append("Use a LoRA made for this base model; the model was left unchanged.")
    raise LoraMismatchError(" ".join(parts), problems=result.problems)
