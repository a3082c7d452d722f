"""Exponential moving average of weights, the smoother model full fine-tunes usually ship.

The decay warms up as (1 + s) / (10 + s) after s updates, capped at `max_decay`: the schedule of
diffusers' `EMAModel` (use_ema_warmup=False), so the first update copies the weights and early
averages are not dominated by the random start.
"""

from __future__ import annotations

import contextlib
from typing import Iterable

import torch


def ema_decay(update: int, max_decay: float, min_decay: float = 0.0) -> float:
    """Decay applied at the `update`-th update (1-based); 0 for the first, so it copies the weights."""
    step = max(0, update - 1)
    if step == 0:
        return 0.0
    return max(min_decay, min((1 + step) / (10 + step), max_decay))


class EmaWeights:
    """Shadow copies of trainable parameters, updated after each optimizer step."""

    def __init__(self, parameters: Iterable[torch.nn.Parameter], max_decay: float = 0.9999) -> None:
        if not 0.0 <= max_decay < 1.0:
            raise ValueError(f"EMA decay must be in [0, 1), got {max_decay!r}")
        self.shadow = [p.detach().clone().float() for p in parameters]
        self.max_decay = max_decay
        self.updates = 0

    @torch.no_grad()
    def update(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        self.updates += 1
        one_minus = 1.0 - ema_decay(self.updates, self.max_decay)
        for shadow, param in zip(self.shadow, parameters):
            shadow.sub_(one_minus * (shadow - param.detach().float()))

    @torch.no_grad()
    def copy_to(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        for shadow, param in zip(self.shadow, parameters):
            param.copy_(shadow.to(param.dtype))

    @contextlib.contextmanager
    def applied_to(self, parameters: Iterable[torch.nn.Parameter]):
        """The averages in `parameters` inside the block and their own values back after it (also on errors):
        exporting a file mid-run must not change the run."""
        parameters = list(parameters)
        live = [p.detach().clone() for p in parameters]
        self.copy_to(parameters)
        try:
            yield
        finally:
            with torch.no_grad():
                for param, value in zip(parameters, live):
                    param.copy_(value)

    def state_dict(self) -> dict[str, torch.Tensor]:
        state = {f"ema.{i}": t for i, t in enumerate(self.shadow)}
        state["ema.updates"] = torch.tensor(self.updates)
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for i, shadow in enumerate(self.shadow):
            shadow.copy_(state[f"ema.{i}"])
        self.updates = int(state["ema.updates"])
