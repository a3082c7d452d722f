"""Optimizers by name for the SD trainers: AdamW, and 8-bit AdamW from bitsandbytes.

8-bit AdamW (Dettmers et al. 2022, block-wise quantised optimizer states) keeps both Adam moments
in one byte per value instead of four, which is what lets people fine-tune SDXL on consumer GPUs.
bitsandbytes keeps tensors under `min_8bit_size` values (4096 by default) in 32-bit state.
"""

from __future__ import annotations

from typing import Callable

import torch

from mixkit.registry import Registry

WEIGHT_DECAY = 1e-2  # torch's and kohya's AdamW default

OPTIMIZERS: Registry[Callable[[list, float], torch.optim.Optimizer]] = Registry("optimizer")


@OPTIMIZERS.register("adamw")
def make_adamw(parameter_groups: list, learning_rate: float) -> torch.optim.Optimizer:
    return torch.optim.AdamW(parameter_groups, lr=learning_rate, weight_decay=WEIGHT_DECAY)


@OPTIMIZERS.register("adamw8bit")
def make_adamw_8bit(parameter_groups: list, learning_rate: float) -> torch.optim.Optimizer:
    try:
        import bitsandbytes
    except ImportError as error:
        raise ImportError("optimizer='adamw8bit' needs the bitsandbytes package: pip install bitsandbytes "
                          f"(or use optimizer='adamw'); import failed with: {error}") from None
    return bitsandbytes.optim.AdamW8bit(parameter_groups, lr=learning_rate, weight_decay=WEIGHT_DECAY)


def make_optimizer(name: str, parameter_groups: list, learning_rate: float) -> torch.optim.Optimizer:
    """The optimizer registered as `name` over `parameter_groups` (dicts with "params" and optional "lr")."""
    return OPTIMIZERS.get(name)(parameter_groups, learning_rate)


def linear_warmup(optimizer: torch.optim.Optimizer, warmup_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """LR factor (s + 1) / warmup_steps for the first steps, then 1 (constant), as both SD trainers use."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup_steps) if warmup_steps else 1.0)
