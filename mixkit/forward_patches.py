"""Who has replaced a module's forward: a serial stamped on every patch and undo, and the test for a foreign patch.

Runtime-mode LoRAs change what a text encoder computes without writing a single parameter, so caches keyed on
parameter versions (the prompt encoder's) cannot see them. Every patch and every undo stamps the module with a
new, ever-increasing number; the largest stamp in a model is then a key that changes whenever its forwards do and
never returns to an earlier value.

mixkit's own wrappers (runtime LoRA, hypernetworks, DeepCache, oneDNN routing) are `ForwardPatch`es: stacked in any
order and removed in any order, each takes only itself out and puts back exactly what was below it.

Code that must not bypass or drop someone else's patch (oneDNN routing, fused QKV, DeepCache) asks
`has_foreign_forward` rather than looking for any instance `forward`: `m.forward = saved`, the usual way to put a
spy or a patch back, leaves the class's own forward bound to `m` in its `__dict__`, which is the plain call.
"""

from __future__ import annotations

import itertools
import types
from typing import Any, Callable

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


class ForwardPatch:
    """One wrapper installed as `module.forward` over whatever forward was there, removable in any order.

    Patches on one module form a chain: each calls the forward `below` it, looked up at call time, so `remove()` can
    take one out of the middle by relinking the patch above it, put back exactly what was below when it is on top
    (an instance forward, the class's own bound forward, or nothing), and never resurrect a forward someone else
    already took off. A wrapper that is not a ForwardPatch (a spy, a user's lambda) may have captured this one; it
    cannot be relinked, so a removed patch also turns into a plain pass-through to what was below it.
    """

    def __init__(self, module: nn.Module, body: Callable[..., Any], name: str) -> None:
        self.module = module
        self.body = body  # body(below_forward, *args, **kwargs)
        self.name = name
        self.below = module.__dict__.get("forward")  # None: the class's forward
        # bound once, here: a call through the patch then only reads attributes (cheap, and simple for torch.compile)
        self.class_forward = types.MethodType(type(module).forward, module)
        self.active = True

    def below_forward(self) -> Callable[..., Any]:
        """What this patch wraps: the instance forward below it, else the class's forward bound to the module."""
        return self.below if self.below is not None else self.class_forward

    def __call__(self, *args, **kwargs):
        if not self.active:
            return self.below_forward()(*args, **kwargs)
        return self.body(self.below_forward(), *args, **kwargs)

    def __repr__(self) -> str:
        return f"<ForwardPatch {self.name} on {type(self.module).__name__}{'' if self.active else ', removed'}>"

    def remove(self) -> None:
        """Take this patch out of the module's forward chain, leaving every other patch as it is; a second call
        does nothing."""
        if not self.active:
            return
        self.active = False
        module = self.module
        top = module.__dict__.get("forward")
        if top is self:
            if self.below is None:
                module.__dict__.pop("forward")
            else:
                module.__dict__["forward"] = self.below
        else:
            above = top
            while isinstance(above, ForwardPatch) and above.below is not self:
                above = above.below
            if isinstance(above, ForwardPatch):
                above.below = self.below
            # else: a foreign wrapper above still calls this (now pass-through) patch, or someone already put the
            # module's forward back past it: either way nothing else is changed
        stamp_forward_change(module)


def install_forward_patch(module: nn.Module, body: Callable[..., Any], name: str) -> ForwardPatch:
    """Install `body(below_forward, *args, **kwargs)` as `module.forward`, over whatever forward it has; undo with
    the returned patch's `remove()`."""
    patch = ForwardPatch(module, body, name)
    module.__dict__["forward"] = patch
    stamp_forward_change(module)
    return patch
