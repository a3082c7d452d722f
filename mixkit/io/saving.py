"""Save tensors as a safetensors file, atomically.

safetensors is the only format mixkit writes: it cannot carry code, and A1111, ComfyUI, kohya and
diffusers all read it. Writing goes through `atomic_output_path`, so a failed or interrupted save
never leaves a half-written checkpoint where a good one used to be.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mixkit.io.atomic import atomic_output_path

if TYPE_CHECKING:
    import torch


def check_save_inputs(tensors: object, metadata: object) -> None:
    """Raise TypeError naming the first key or value that safetensors cannot store."""
    import torch

    if not isinstance(tensors, Mapping):
        raise TypeError(f"tensors must be a mapping of name -> torch.Tensor, got {type(tensors).__name__}")
    for key, value in tensors.items():
        if not isinstance(key, str):
            raise TypeError(f"tensor names must be strings, got {key!r} ({type(key).__name__})")
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"tensors[{key!r}] must be a torch.Tensor, got {type(value).__name__}")
        if value.layout != torch.strided:
            raise TypeError(f"tensors[{key!r}] has layout {value.layout}; convert it with .to_dense() first")
    if metadata is None:
        return
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping of str -> str or None, got {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(
                f"metadata entries must be str -> str (safetensors stores text only), got {key!r}: {value!r}; "
                "encode other values with json.dumps"
            )


def save_safetensors(
    tensors: Mapping[str, "torch.Tensor"],
    path: str | os.PathLike,
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write `tensors` (and optional text `metadata`) to `path` as safetensors, replacing it atomically."""
    from safetensors.torch import save_file

    check_save_inputs(tensors, metadata)
    # safetensors stores raw contiguous bytes; .contiguous() changes memory layout only, never values.
    prepared = {key: value.detach().contiguous() for key, value in tensors.items()}
    with atomic_output_path(path) as temp:
        try:
            save_file(prepared, str(temp), metadata=dict(metadata) if metadata is not None else None)
        except RuntimeError as error:
            if "share memory" not in str(error) and "shared" not in str(error):
                raise
            raise ValueError(
                f"Cannot save to {str(path)!r}: some tensors share memory (tied weights), which safetensors "
                f"cannot store twice. Pass a dict with .clone()d tensors or drop the duplicate names. ({error})"
            ) from None
