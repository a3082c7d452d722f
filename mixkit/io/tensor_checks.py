"""Checks on the tensors a weights file yielded, for loaders that size a network from the file's shapes.

A pickled checkpoint can hold a tensor whose shape is far larger than the data behind it: torch saves a view's
storage with its size and strides, so a 1-value storage with stride 0 loads as a [100000000, 16] tensor from a file
of a few bytes. A loader that builds its network from such shapes would then allocate gigabytes for a tiny file. A
file with NaN/inf weights (a failed conversion, an fp16 overflow) loads fine and then paints black or empty results
without an error. Both are refused here, naming the file and the tensor.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Mapping

from mixkit.errors import CheckpointFormatError

if TYPE_CHECKING:
    import torch


def refuse_hollow_tensors(file: str | os.PathLike, state: Mapping[str, "torch.Tensor"]) -> None:
    """CheckpointFormatError when a tensor has more values than its storage holds (a stride-0 view saved as is)."""
    for name, tensor in state.items():
        held = tensor.untyped_storage().nbytes() - tensor.storage_offset() * tensor.element_size()
        if tensor.numel() * tensor.element_size() > held:
            raise CheckpointFormatError(
                f"{os.fspath(file)!r}: tensor {name!r} claims shape {tuple(tensor.shape)} but the file stores only "
                f"{max(held, 0)} bytes for it (a broadcast view, not weights). The file is damaged or crafted; "
                "re-download it from its official release.")


def nested_tensors(loaded, prefix: str = "") -> dict[str, "torch.Tensor"]:
    """Every tensor inside a loaded pickle (dicts, lists and tuples walked), by a dotted path ("string_to_param.*")."""
    import torch

    if isinstance(loaded, torch.Tensor):
        return {prefix or "<tensor>": loaded}
    if isinstance(loaded, dict):
        items = loaded.items()
    elif isinstance(loaded, (list, tuple)):
        items = enumerate(loaded)
    else:
        return {}
    found = {}
    for key, value in items:
        found.update(nested_tensors(value, f"{prefix}.{key}" if prefix else str(key)))
    return found


def first_non_finite(state: Mapping[str, "torch.Tensor"]) -> str | None:
    """The name of the first floating tensor holding NaN or inf, or None (meta tensors, which hold nothing, skipped).

    One `aminmax` per tensor (NaN propagates, inf shows) reads each weight once, and one sync covers them all: a few
    hundred tiny checks would cost more in overhead than in math; `isfinite().all()` takes about 20x as long."""
    import torch

    tensors = [(name, t) for name, t in state.items() if t.is_floating_point() and t.numel() and not t.is_meta]
    if not tensors:
        return None
    with torch.no_grad():
        extremes = torch.stack([torch.stack(torch.aminmax(t)).float() for _, t in tensors])
        bad = (~torch.isfinite(extremes)).any(dim=1)
    return tensors[int(bad.nonzero()[0])][0] if bad.any() else None


def refuse_non_finite_tensors(file: str | os.PathLike, state: Mapping[str, "torch.Tensor"], what: str) -> None:
    """CheckpointFormatError naming the first floating tensor with NaN or inf values."""
    name = first_non_finite(state)
    if name is not None:
        raise CheckpointFormatError(
            f"{os.fspath(file)!r}: the {what} weight {name!r} contains NaN or infinite values; the file is broken (a "
            "failed conversion or an fp16 overflow) and would give black or unchanged results. Re-download it.")
