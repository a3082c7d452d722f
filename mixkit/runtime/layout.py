"""Dtype and memory-layout changes of whole modules."""

from __future__ import annotations

import torch


def cast_module(module: torch.nn.Module, dtype: torch.dtype) -> None:
    """Cast weights once: cheaper per step than autocast, which re-casts every weight every call."""
    module.to(dtype=dtype)


def to_channels_last(module: torch.nn.Module) -> None:
    """NHWC weights: oneDNN (CPU) and cuDNN (tensor cores) convolutions are fastest in this layout,
    and keeping it end to end avoids a layout conversion around every conv."""
    module.to(memory_format=torch.channels_last)
