"""The checkpoints a merge reads: each as a name -> tensor lookup that loads one tensor when asked.

A safetensors file is opened with `safe_open` (memory-mapped), so a merge holds its output and the few tensors of
the key in hand rather than three full fp32 models; a pickled `.ckpt` has no random access and is loaded whole
through mixkit's safe reader (`load_state_dict`: weights-only unpickling, never unsafe globals).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mixkit.io.formats import check_checkpoint_file, detect_checkpoint_format

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class MergeSource:
    """A checkpoint file and the name A1111 lists it by (its path below the models folder, extension included)."""

    path: Path
    name: str

    @property
    def model_name(self) -> str:
        """A1111's CheckpointInfo.model_name: the name without extension, "/" replaced by "_" (used in file names)."""
        return os.path.splitext(self.name.replace("/", "_").replace("\\", "_"))[0]


def as_merge_source(value: "str | os.PathLike | MergeSource", role: str) -> MergeSource:
    """A MergeSource for a path (named by its file name) or an existing one, checked to be a single file."""
    if isinstance(value, MergeSource):
        path, name = value.path, value.name
    elif isinstance(value, (str, os.PathLike)):
        path, name = Path(value), Path(value).name
    else:
        raise TypeError(f"{role} must be a checkpoint path or MergeSource, got {type(value).__name__}")
    if Path(path).is_dir():
        raise ValueError(f"{role} {str(path)!r} is a folder (a diffusers model?); the Checkpoint Merger merges "
                         "single-file checkpoints (.safetensors / .ckpt). Convert the folder to a single file first.")
    return MergeSource(check_checkpoint_file(path), name)


class CheckpointTensors:
    """Read-only name -> tensor access to one checkpoint file; `get` returns a fresh CPU tensor."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle = None
        self._loaded: dict[str, "torch.Tensor"] | None = None
        if detect_checkpoint_format(path) == "safetensors":
            from safetensors import safe_open

            from mixkit.io.safetensors_header import read_safetensors_header, tensor_entries

            self._keys = list(tensor_entries(read_safetensors_header(path)))  # refuses truncated files here
            self._handle = safe_open(str(path), framework="pt", device="cpu")
        else:
            from mixkit.io.loading import load_state_dict

            self._loaded = load_state_dict(path)
            self._keys = list(self._loaded)
        self._key_set = frozenset(self._keys)

    def keys(self) -> list[str]:
        return list(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._key_set

    def get(self, key: str) -> "torch.Tensor":
        if self._loaded is not None:
            return self._loaded[key]
        return self._handle.get_tensor(key)

    def close(self) -> None:
        self._handle = None
        self._loaded = None
