"""A process-wide serial stamped on a module whenever something patches or unpatches its forward.

Runtime-mode LoRAs change what a text encoder computes without writing a single parameter, so caches keyed on
parameter versions (the prompt encoder's) cannot see them. Every patch and every undo stamps the module with a
new, ever-increasing number; the largest stamp in a model is then a key that changes whenever its forwards do and
never returns to an earlier value.
"""

from __future__ import annotations

import itertools

from torch import nn

_SERIAL = itertools.count(1)
_ATTRIBUTE = "_mixkit_forward_serial"


def stamp_forward_change(module: nn.Module) -> None:
    """Record that `module`'s forward was just patched or restored."""
    module.__dict__[_ATTRIBUTE] = next(_SERIAL)


def latest_forward_change(model: nn.Module) -> int:
    """The newest stamp among `model`'s modules (0 when none was ever patched)."""
    return max((module.__dict__.get(_ATTRIBUTE, 0) for module in model.modules()), default=0)
