"""A1111's "Tiling": a picture whose left edge continues its right edge and its top edge its bottom, so it tiles.

Every padded 2-D convolution of the UNet and the VAE pads circularly (wrapping around the picture) instead of with
zeros, as A1111's `apply_circular` sets `padding_mode` on the model's `Conv2d` layers; attention is already global,
so nothing else sees an edge. It is switched on for one call and always switched back, also when the call fails, so
a model shared by other requests never keeps it.
"""

from __future__ import annotations

import contextlib
from typing import Iterator


def padded_convolutions(*modules) -> list:
    """The `Conv2d` layers of `modules` (None skipped) that pad their input: the only ones an edge reaches."""
    import torch

    layers = []
    for module in modules:
        if module is None:
            continue
        for layer in module.modules():
            if isinstance(layer, torch.nn.Conv2d) and any(pad != 0 for pad in _padding(layer)):
                layers.append(layer)
    return layers


def _padding(layer) -> tuple:
    """A layer's padding as numbers ("same" counts as padded when its kernel is larger than 1)."""
    if isinstance(layer.padding, str):
        return tuple(k - 1 for k in layer.kernel_size) if layer.padding == "same" else (0,)
    return tuple(layer.padding)


def check_tiling_backend(model) -> None:
    """ValueError before any work when `model` runs on a backend whose graphs were compiled with zero padding
    (OpenVINO): the switch would be silently ignored. Eager torch and torch.compile (which recompiles on the changed
    padding mode) take it."""
    backend = model.extras.get("execution_backend")
    if backend not in (None, "torch", "torch.compile"):
        raise ValueError(f"tiling=True changes the UNet's and VAE's convolutions, which the {backend} backend has "
                         "compiled into fixed graphs; make tiled images on backend='torch' (or 'torch.compile').")


@contextlib.contextmanager
def seamless_tiling(*modules, enabled: bool = True) -> Iterator[None]:
    """Within the block, `modules`' padded convolutions pad circularly (`enabled`; otherwise nothing changes)."""
    if not enabled:
        yield
        return
    layers = [layer for layer in padded_convolutions(*modules) if layer.padding_mode != "circular"]
    before = [layer.padding_mode for layer in layers]
    for layer in layers:
        layer.padding_mode = "circular"
    try:
        yield
    finally:
        for layer, mode in zip(layers, before):
            layer.padding_mode = mode
