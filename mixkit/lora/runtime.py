"""Runtime mode: LoRAs applied in the forward pass, the model's parameters never written.

Plain low-rank LoRA runs as a bypass branch (`x -> down -> [mid] -> up`), which costs O(rank)
per call instead of a full weight; every other family (LoHa, LoKr, IA3, DoRA, full, norm) has
its weight change precomputed once and the output change `op(x, ΔW)` is added. Patching the
instance's `forward` (not the class) keeps removal exact: the patch takes itself out of the module's chain
of forward patches and puts back what was below it (`mixkit.forward_patches`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from mixkit.forward_patches import install_forward_patch


@dataclass
class BypassBranch:
    """One low-rank branch: down (and Tucker mid) then up, times scale*strength."""

    down: torch.Tensor
    up: torch.Tensor
    mid: torch.Tensor | None
    factor: float


@dataclass
class RuntimePatch:
    """What one patched module adds: a dense weight/bias change and/or low-rank branches."""

    weight_change: torch.Tensor | None = None
    bias_change: torch.Tensor | None = None
    branches: list[BypassBranch] = field(default_factory=list)


def _dense_change(module: nn.Module, x: torch.Tensor, patch: RuntimePatch) -> torch.Tensor:
    """The output change caused by ΔW/Δb; every supported layer is linear in its parameters.

    Adding a change to the module's own output (instead of re-running it with W + ΔW) keeps
    several runtime patches on one module stackable and leaves the original forward untouched.
    """
    weight, bias = (None if t is None else _like(t, x) for t in (patch.weight_change, patch.bias_change))
    if isinstance(module, nn.Linear):
        return F.linear(x, weight, bias) if weight is not None else bias
    if isinstance(module, (nn.Conv1d, nn.Conv2d)):
        if weight is None:
            return bias.reshape(1, -1, *([1] * (x.dim() - 2)))
        conv = F.conv2d if isinstance(module, nn.Conv2d) else F.conv1d
        x, padding = _padded_input(module, x)
        return conv(x, weight, bias, module.stride, padding, module.dilation, module.groups)
    if isinstance(module, nn.GroupNorm):
        normalized = F.group_norm(x, module.num_groups, None, None, module.eps)
        view = (1, -1, *([1] * (x.dim() - 2)))
        change = normalized * weight.reshape(view) if weight is not None else torch.zeros_like(x)
        return change + bias.reshape(view) if bias is not None else change
    if isinstance(module, nn.LayerNorm):
        normalized = F.layer_norm(x, module.normalized_shape, None, None, module.eps)
        change = normalized * weight if weight is not None else torch.zeros_like(x)
        return change + bias if bias is not None else change
    raise TypeError(f"runtime LoRA cannot patch {type(module).__name__}")  # excluded by matching


def _padded_input(module: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, Any]:
    """(input, padding) for a change computed as `module` computes its output: a layer padding other than with
    zeros (A1111's Tiling makes them circular for a call, `pipelines.tiling`) pads the input itself, as torch's
    own `_conv_forward` does, so the change wraps around the edges too instead of putting a seam there."""
    if module.padding_mode == "zeros":
        return x, module.padding
    return F.pad(x, module._reversed_padding_repeated_twice, mode=module.padding_mode), 0


def _like(tensor: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The patch tensor in the input's dtype: a layer whose weights are stored in half precision and
    computed in float32 (the low-memory preset) sees float32 inputs but had half-precision weights
    when the patch was made."""
    return tensor if tensor.dtype == x.dtype else tensor.to(x.dtype)


def _branch_output(module: nn.Module, x: torch.Tensor, branch: BypassBranch) -> torch.Tensor:
    branch_down, branch_up = _like(branch.down, x), _like(branch.up, x)
    if isinstance(module, nn.Linear):
        hidden = F.linear(x, branch_down.reshape(branch_down.shape[0], -1))
        return F.linear(hidden, branch_up.reshape(branch_up.shape[0], -1)) * branch.factor
    conv = F.conv2d if isinstance(module, nn.Conv2d) else F.conv1d
    spatial = module.weight.dim() - 2
    down = branch_down.reshape(*branch_down.shape[:2], *([1] * spatial)) if branch_down.dim() == 2 else branch_down
    up = branch_up.reshape(*branch_up.shape[:2], *([1] * spatial))
    if branch.mid is not None:
        hidden, padding = _padded_input(module, conv(x, down))
        hidden = conv(hidden, _like(branch.mid, x), stride=module.stride, padding=padding, dilation=module.dilation)
    else:
        x, padding = _padded_input(module, x)
        hidden = conv(x, down, stride=module.stride, padding=padding, dilation=module.dilation)
    return conv(hidden, up) * branch.factor


def can_bypass(module: nn.Module) -> bool:
    """Low-rank branches need a plain (ungrouped) Linear or Conv; its padding mode is followed at each call."""
    if isinstance(module, nn.Linear):
        return True
    return isinstance(module, (nn.Conv1d, nn.Conv2d)) and module.groups == 1


def install_patch(module: nn.Module, patch: RuntimePatch) -> Callable[[], None]:
    """Wrap `module.forward` (whatever it is: the class's, another LoRA's, a hypernetwork's) with one adding `patch`;
    return the function that takes exactly this wrapper out again, in any order relative to other patches
    (`mixkit.forward_patches.ForwardPatch`). Installing stamps the module, so caches of this model's outputs (the
    prompt encoder's) are not reused."""
    dense = patch.weight_change is not None or patch.bias_change is not None

    def forward(below, x, *args, **kwargs):
        out = below(x, *args, **kwargs)
        if dense:
            out = out + _dense_change(module, x, patch)
        for branch in patch.branches:
            out = out + _branch_output(module, x, branch)
        return out

    return install_forward_patch(module, forward, "runtime LoRA").remove
