"""Who has replaced a module's forward: a serial stamped on every patch and undo, and the test for a foreign patch.

Runtime-mode LoRAs change what a text encoder computes without writing a single parameter, so caches keyed on
parameter versions (the prompt encoder's) cannot see them. Every patch and every undo stamps the module with a
new, ever-increasing number; the largest stamp in a model is then a key that changes whenever its forwards do and
never returns to an earlier value.

mixkit's own wrappers (runtime LoRA, hypernetworks, DeepCache, oneDNN routing, and on a VAE's `decode` the NaN guard
and TAESD) are `ForwardPatch`es: stacked in any order and removed in any order, each takes only itself out and puts
back exactly what was below it. A patch that only transforms the input (a hypernetwork) stays above the others, so the
result does not depend on which was applied first.

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


def has_foreign_forward(module: nn.Module, attribute: str = "forward") -> bool:
    """Whether an instance attribute stands in for the class's `attribute` method (`forward` unless told): a wrapper,
    a lambda, a runtime LoRA patch.

    The class's own method bound to `module` itself does not count (what restoring a saved `module.forward` leaves);
    the same function bound to another module does, as it would compute with that module's weights."""
    method = module.__dict__.get(attribute)
    return method is not None and not _is_own_method(module, attribute, method)


class ForwardPatch:
    """One wrapper installed as `module.<attribute>` (`forward` unless told) over whatever method was there, removable
    in any order.

    Patches on one method form a chain: each calls the method `below` it, looked up at call time, so `remove()` can
    take one out of the middle by relinking the patch above it, put back exactly what was below when it is on top
    (an instance attribute, the class's own bound method, or nothing), and never resurrect a method someone else
    already took off. A wrapper that is not a ForwardPatch (a spy, a user's lambda) may have captured this one; it
    cannot be relinked, so a removed patch also turns into a plain pass-through to what was below it.

    A patch that only changes the input before passing it down (`transforms_input`, a hypernetwork on `to_k`) stays
    above every other patch of the chain: one installed later goes in below it, so it sees the input the module's
    own weights see (A1111 adds a LoRA's `B·hn(x)`, not `B·x`, to `W·hn(x)`), whichever was applied first.
    """

    def __init__(self, module: nn.Module, body: Callable[..., Any], name: str, attribute: str = "forward",
                 transforms_input: bool = False) -> None:
        self.module = module
        self.body = body  # body(below_method, *args, **kwargs)
        self.name = name
        self.attribute = attribute
        self.transforms_input = transforms_input
        self.below = module.__dict__.get(attribute)  # None: the class's method
        # bound once, here: a call through the patch then only reads attributes (cheap, and simple for torch.compile)
        self.class_forward = types.MethodType(getattr(type(module), attribute), module)
        self.active = True

    def below_forward(self) -> Callable[..., Any]:
        """What this patch wraps: the instance method below it, else the class's method bound to the module."""
        return self.below if self.below is not None else self.class_forward

    def __call__(self, *args, **kwargs):
        if not self.active:
            return self.below_forward()(*args, **kwargs)
        return self.body(self.below_forward(), *args, **kwargs)

    def __repr__(self) -> str:
        where = "" if self.attribute == "forward" else f".{self.attribute}"
        return (f"<ForwardPatch {self.name} on {type(self.module).__name__}{where}"
                f"{'' if self.active else ', removed'}>")

    def remove(self) -> None:
        """Take this patch out of the module's chain, leaving every other patch as it is; a second call does
        nothing."""
        if not self.active:
            return
        self.active = False
        module, attribute = self.module, self.attribute
        if self.transforms_input:
            _count_input_transforms(module, attribute, -1)
        top = module.__dict__.get(attribute)
        if top is self:
            if self.below is None:
                module.__dict__.pop(attribute)
            else:
                module.__dict__[attribute] = self.below
        else:
            above = top
            while isinstance(above, ForwardPatch) and above.below is not self:
                above = above.below
            if isinstance(above, ForwardPatch):
                above.below = self.below
            # else: a foreign wrapper above still calls this (now pass-through) patch, or someone already put the
            # module's method back past it: either way nothing else is changed
        stamp_forward_change(module)


def _input_transforms_key(attribute: str) -> str:
    return f"_mixkit_{attribute}_input_transforms"


def _count_input_transforms(module: nn.Module, attribute: str, change: int) -> None:
    """Keep count of the active input-transforming patches on `module.<attribute>`, which `_insertion_point` must
    find all of in the chain before it can put a patch below them."""
    key = _input_transforms_key(attribute)
    count = module.__dict__.get(key, 0) + change
    if count:
        module.__dict__[key] = count
    else:
        module.__dict__.pop(key, None)


def _insertion_point(module: nn.Module, attribute: str, name: str) -> ForwardPatch | None:
    """The lowest input-transforming patch at the top of `module.<attribute>`'s chain, under which a new patch goes
    (None: on top). Refuses when a wrapper mixkit did not install hides one of them, since a patch put above that
    wrapper would compute on the input before the transform."""
    expected = module.__dict__.get(_input_transforms_key(attribute), 0)
    if not expected:
        return None
    lowest, seen = None, 0
    current = module.__dict__.get(attribute)
    while isinstance(current, ForwardPatch):
        if current.transforms_input and current.active:
            lowest, seen = current, seen + 1
        current = current.below
    if seen < expected and current is not None and not _is_own_method(module, attribute, current):
        raise ValueError(f"cannot install {name} on {type(module).__name__}.{attribute}: {expected - seen} "
                         f"input-transforming patch(es) (a hypernetwork) there are wrapped by {current!r}, which mixkit "
                         f"did not install, so {name} cannot go below them and would compute on the raw input; "
                         f"restore that wrapper first, or apply {name} before it")
    return lowest


def _is_own_method(module: nn.Module, attribute: str, method: Any) -> bool:
    """Whether `method` is the class's own method bound to `module` (what `m.forward = saved` puts back)."""
    return (getattr(method, "__self__", None) is module
            and getattr(method, "__func__", None) is getattr(type(module), attribute, None))


def check_patch_inputs(module: Any, body: Any, name: Any, attribute: Any) -> None:
    """Refuse what cannot be a patch: a non-module, a body that is not callable, a method the class does not have."""
    if not hasattr(module, "__dict__"):  # a torch module, or a stand-in for one (the OpenVINO VAE takes TAESD)
        raise TypeError(f"a forward patch goes on a torch module, got {type(module).__name__}")
    if not callable(body):
        raise TypeError(f"the patch body must be callable as body(below, *args, **kwargs), got {type(body).__name__}")
    if not isinstance(name, str) or not name:
        raise TypeError(f"the patch needs a name for messages and repr, got {name!r}")
    if not isinstance(attribute, str) or not callable(getattr(type(module), attribute, None)):
        raise ValueError(f"{type(module).__name__} has no method {attribute!r} to patch; pass the name of one of its "
                         "class's methods, such as 'forward' or (a VAE) 'decode'")


def install_forward_patch(module: nn.Module, body: Callable[..., Any], name: str, *, attribute: str = "forward",
                          transforms_input: bool = False) -> ForwardPatch:
    """Install `body(below_method, *args, **kwargs)` as `module.<attribute>` (`forward` unless told), over whatever
    method it has; undo with the returned patch's `remove()`.

    `transforms_input=True` marks a body that only changes the input it passes down (a hypernetwork): it goes on top,
    and patches installed later go in below it (`ForwardPatch`). Nothing is changed when a check fails."""
    check_patch_inputs(module, body, name, attribute)
    above = None if transforms_input else _insertion_point(module, attribute, name)
    patch = ForwardPatch(module, body, name, attribute, transforms_input)
    if above is None:
        module.__dict__[attribute] = patch
    else:
        patch.below = above.below
        above.below = patch
    if transforms_input:
        _count_input_transforms(module, attribute, +1)
    stamp_forward_change(module)
    return patch
