"""The checks and resizing both restorers share at their public entry point (`module(faces, weight)`)."""

from __future__ import annotations

import numbers
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

DEFAULT_FIDELITY = 0.5  # A1111's `code_former_weight` default


def check_faces(faces: object, module: nn.Module) -> None:
    """Refuse anything but a batch of square RGB faces [N, 3, S, S] on the module's device in its dtype."""
    name = type(module).__name__
    if not isinstance(faces, torch.Tensor):
        raise TypeError(f"{name} restores a tensor of aligned faces [N, 3, 512, 512] in [-1, 1], "
                        f"got {type(faces).__name__}.")
    if faces.ndim != 4 or faces.shape[1] != 3 or faces.shape[2] != faces.shape[3] or faces.shape[0] == 0:
        raise ValueError(f"{name} restores aligned faces of shape [N, 3, S, S] (S = 512 for the released files), "
                         f"got {tuple(faces.shape)}.")
    parameter = next(module.parameters())
    if faces.device != parameter.device or faces.dtype != parameter.dtype:
        raise ValueError(f"{name} is on {parameter.device} in {parameter.dtype}; the faces are on {faces.device} in "
                         f"{faces.dtype}. Move them with faces.to(device, dtype) first.")


def check_fidelity(weight: object) -> float:
    """CodeFormer's fidelity w: None means A1111's default 0.5; otherwise a number in [0, 1]."""
    if weight is None:
        return DEFAULT_FIDELITY
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
        raise TypeError(f"weight (CodeFormer fidelity) must be a number in [0, 1] or None, got {weight!r}.")
    if not 0.0 <= float(weight) <= 1.0:
        raise ValueError(f"weight (CodeFormer fidelity) must be in [0, 1] (0 = most restored, 1 = closest to the "
                         f"input), got {weight!r}.")
    return float(weight)


def restore_at_size(faces: torch.Tensor, size: int, restore: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """`restore` run at the network's `size` (faces resized there and back when they differ), clamped to [-1, 1]
    as GFPGANer and A1111 clamp when converting back to pixels."""
    side = faces.shape[-1]
    if side == size:
        return restore(faces).clamp(-1.0, 1.0)
    resized = F.interpolate(faces, size=(size, size), mode="bilinear", align_corners=False, antialias=size < side)
    out = restore(resized)
    return F.interpolate(out, size=(side, side), mode="bilinear", align_corners=False,
                         antialias=side < size).clamp(-1.0, 1.0)
