"""Who has replaced a module's forward: a serial stamped on every patch and undo, and the test for a foreign patch.

Runtime-mode LoRAs change what a text encoder computes without writing a single parameter, so caches keyed on
parameter versions (the prompt encoder's) cannot see them. Every patch and every undo stamps the module with a
new, ever-increasing number; the largest stamp in a model is then a key that changes whenever its forwards do and
never returns to an earlier value.

Code that must not bypass or drop someone else's patch (oneDNN routing, fused QKV, DeepCache) asks
`has_foreign_forward` rather than looking for any instance `forward`: `m.forward = saved`, the usual way to put a
spy or a patch back, leaves the class's own forward bound to `m` in its `__dict__`, which is the plain call.
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


def has_foreign_forward(module: nn.Module) -> bool:
    """Whether an instance attribute stands in for the class's forward: a wrapper, a lambda, a runtime LoRA patch.

    The class's own forward bound to `module` itself does not count (what restoring a saved `module.forward` leaves);
    the same function bound to another module does, as it would compute with that module's weights."""
    forward = module.__dict__.get("forward")
    if forward is None:
        return False
    return not (getattr(forward, "__self__", None) is module
                and getattr(forward, "__func__", None) is type(module).forward)
