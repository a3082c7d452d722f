"""The checkpoints a merge reads: each as a name -> tensor lookup that loads one tensor when asked.

A safetensors tensor is read with a plain `read` of its bytes (offsets from the validated header), so a merge holds
its output and the tensors of the key in hand rather than three whole models. Not memory-mapped on purpose: pages of
a mapped file that were touched stay resident (and count as the process's memory) until it is unmapped, which
made a mapped three-model merge peak above A1111's whole-file loads (measured in `benchmarks/checkpoint_merge.py`).
A pickled `.ckpt` has no random access and is loaded whole through mixkit's safe reader (`load_state_dict`:
weights-only unpickling, never unsafe globals).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mixkit.errors import CheckpointFormatError
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
            from mixkit.io.safetensors_header import read_safetensors_header, tensor_entries

            header = read_safetensors_header(path)  # offsets checked against the file size: truncation refused here
            self._entries = tensor_entries(header)
            self._keys = list(self._entries)
            self._handle = open(path, "rb", buffering=0)  # unbuffered: tensors are read straight into their memory
            self._data_start = 8 + int.from_bytes(self._handle.read(8), "little")
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
        import torch

        entry = self._entries[key]
        dtype = _torch_dtype(entry["dtype"])
        if dtype is None:  # a dtype this reader does not map (sub-byte floats): safetensors' own reader
            from safetensors import safe_open

            with safe_open(str(self.path), framework="pt", device="cpu") as handle:
                return handle.get_tensor(key)
        begin, end = entry["data_offsets"]
        raw = torch.empty(end - begin, dtype=torch.uint8)  # read straight into torch's memory: no Python bytes copy
        self._handle.seek(self._data_start + begin)
        view, done = memoryview(raw.numpy()), 0
        while done < end - begin:  # one read returns at most ~2 GiB on Linux
            count = self._handle.readinto(view[done:])
            if not count:
                raise CheckpointFormatError(f"{str(self.path)!r} ended inside tensor {key!r}; the file changed or is "
                                            "truncated. Re-download it.")
            done += count
        return raw.view(dtype).reshape(entry["shape"])

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self._handle = None
        self._loaded = None


def _torch_dtype(name: str):
    """The torch dtype of a safetensors dtype name (little-endian, as the format stores), None if not mapped."""
    import sys

    import torch

    if sys.byteorder != "little":
        return None
    return {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
            "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
            "BOOL": torch.bool, "F8_E4M3": getattr(torch, "float8_e4m3fn", None),
            "F8_E5M2": getattr(torch, "float8_e5m2", None)}.get(name)


def release_freed_memory() -> None:
    """Hand memory freed by the C heap back to the OS (glibc's malloc_trim); a no-op elsewhere.

    A merge reads three tensors per key, keeps one result and frees the rest; glibc leaves the freed chunks of the
    heap resident, interleaved with the kept results, so without a trim a merge's resident memory grew by about one
    extra model (measured: 2.1x one model's size before, about 1.2x with a trim every few keys;
    `benchmarks/checkpoint_merge.py`)."""
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        _MALLOC_TRIM = _find_malloc_trim()
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


def _find_malloc_trim():
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None).malloc_trim  # the libc this process already uses; absent on musl
    except (OSError, AttributeError):
        return False


_MALLOC_TRIM = None
