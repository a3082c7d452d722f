"""Typed ports: the kinds of values tasks exchange, checked when a chain is built and when it runs.

Like ComfyUI's `INPUT_TYPES`/`RETURN_TYPES`, every task input and output has a port type, so a
chain that would feed boxes into a prompt fails before any model loads, and a user value of the
wrong kind (an image where text is expected) fails before any model runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from mixkit.registry import Registry


@dataclass(frozen=True)
class PortType:
    """A named kind of value; `check` says whether a runtime value is of this kind."""

    name: str
    description: str
    check: Callable[[Any], bool]
    # Fewest items a list port needs. Checked apart from `check` so an empty list is reported as empty
    # ("pass at least 1 image"), not as a value of the wrong kind ("expects images, got list").
    min_items: int = 0


PORT_TYPES: Registry[PortType] = Registry("AppFlow port type")


def _is_image(value: Any) -> bool:
    from PIL import Image

    return isinstance(value, Image.Image)


def _is_tensor(value: Any, ndim: int, last: int | None = None) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.ndim == ndim and (last is None or value.shape[-1] == last)


def _is_list_of(value: Any, check: Callable[[Any], bool]) -> bool:
    return isinstance(value, (list, tuple)) and all(check(item) for item in value)


def register_port_type(name: str, description: str, check: Callable[[Any], bool], *, min_items: int = 0) -> PortType:
    """Add a port type (e.g. 'audio' for an audio app); chains can then declare ports of it."""
    if isinstance(min_items, bool) or not isinstance(min_items, int) or min_items < 0:
        raise ValueError(f"min_items of port type {name!r} must be a non-negative int, got {min_items!r}.")
    return PORT_TYPES.register(name, PortType(name, description, check, min_items))


register_port_type("image", "a PIL image, or an image file path, http(s) URL or numpy array", _is_image)
register_port_type("images", "a list of PIL images (or image file paths / URLs / numpy arrays)",
                   lambda v: _is_list_of(v, _is_image), min_items=1)
register_port_type("text", "a string", lambda v: isinstance(v, str))
register_port_type("texts", "a list of strings", lambda v: _is_list_of(v, lambda s: isinstance(s, str)))
register_port_type("boxes", "a float tensor (N, 4) of x0, y0, x1, y1 pixel boxes",
                   lambda v: _is_tensor(v, 2, 4) and v.is_floating_point())
register_port_type("scores", "a float tensor (N,) of confidences", lambda v: _is_tensor(v, 1) and v.is_floating_point())
register_port_type("masks", "a bool tensor (N, H, W), one mask per box",
                   lambda v: _is_tensor(v, 3) and str(v.dtype) == "torch.bool")
register_port_type("label_scores", "a dict label -> probability", lambda v: isinstance(v, dict)
                   and all(isinstance(k, str) and isinstance(p, float) for k, p in v.items()))
register_port_type("label_scores_list", "a list of dicts label -> probability, one per image",
                   lambda v: _is_list_of(v, PORT_TYPES.get("label_scores").check))
register_port_type("flag", "True or False", lambda v: isinstance(v, bool))
register_port_type("int", "an integer (e.g. the seed a call drew for seed -1)",
                   lambda v: isinstance(v, int) and not isinstance(v, bool))
register_port_type("ints", "a list of integers (e.g. the seed of each image)",
                   lambda v: _is_list_of(v, PORT_TYPES.get("int").check))
register_port_type("json", "a JSON-serialisable dict", lambda v: isinstance(v, dict))


def describe_value(value: Any) -> str:
    """A short description of a runtime value for error messages (never its full repr)."""
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"{type(value).__name__} of shape {tuple(shape)}"
    if isinstance(value, str):
        return f"str {value[:40]!r}"
    return type(value).__name__


def check_value(port_type: str, value: Any, where: str) -> None:
    """Raise TypeError naming `where` (task and key) if `value` is not of `port_type`, ValueError if it is too short."""
    kind = PORT_TYPES.get(port_type)
    if isinstance(value, (list, tuple)) and len(value) < kind.min_items:
        # List ports are named for their items in the plural ("images"), so one item is the name without "s".
        noun = kind.name[:-1] if kind.min_items == 1 and kind.name.endswith("s") else kind.name
        held = "is an empty list" if not value else f"holds only {len(value)}"
        raise ValueError(f"{where} {held}; pass at least {kind.min_items} {noun}: {kind.description}.")
    if not kind.check(value):
        raise TypeError(f"{where} expects {kind.name} ({kind.description}), got {describe_value(value)}.")
