"""Read a LoRA file into tensors and metadata, refusing anything unsafe or corrupt.

All file access for `mixkit.lora` goes through `read_lora_file`. Pickle files (`.pt`, `.ckpt`,
`.bin`) go through the shared `mixkit.io.loading.load_state_dict`, which scans the pickle's globals
and loads only with `torch.load(weights_only=True)`. safetensors is read here: the header is
parsed and the tensors are views into a single read of the file, because the per-tensor reads of
`safe_open` made a 30,000-key LoRA take seconds.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import torch

from mixkit.errors import CheckpointFormatError, ModelNotFoundError

SAFETENSORS_SUFFIXES = (".safetensors",)
PICKLE_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin")
LORA_SUFFIXES = SAFETENSORS_SUFFIXES + PICKLE_SUFFIXES
# A header larger than this is not a LoRA header but a corrupt length field (safetensors caps at 100 MB).
MAX_HEADER_BYTES = 100 * 1024 * 1024


@dataclass
class LoraFileContents:
    """Tensors and string metadata of one LoRA file, as stored."""

    path: Path
    tensors: dict[str, torch.Tensor]
    metadata: dict[str, str] = field(default_factory=dict)


def read_safetensors_header(path: Path) -> tuple[dict, int]:
    """Parse the JSON header of a safetensors file; return it and the byte offset of the tensor data."""
    size = path.stat().st_size
    if size < 8:
        raise CheckpointFormatError(f"{path}: file is empty or truncated ({size} bytes); re-download it.")
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        if length > MAX_HEADER_BYTES or 8 + length > size:
            raise CheckpointFormatError(
                f"{path}: corrupt safetensors header (declares {length} header bytes, file has {size}); "
                "the file is truncated or not a safetensors file; re-download it."
            )
        raw = handle.read(length)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointFormatError(f"{path}: safetensors header is not valid JSON ({error}); re-download the file.") from None
    if not isinstance(header, dict):
        raise CheckpointFormatError(f"{path}: safetensors header is not a JSON object; re-download the file.")
    data_bytes = size - 8 - length
    for key, info in header.items():
        if key == "__metadata__":
            continue
        end = info.get("data_offsets", [0, 0])[1] if isinstance(info, dict) else None
        if not isinstance(end, int) or end > data_bytes:
            raise CheckpointFormatError(
                f"{path}: tensor {key!r} ends at byte {end} but the file holds {data_bytes} data bytes; "
                "the file is truncated; re-download it."
            )
    return header, 8 + length


def read_lora_file(path: str | Path) -> LoraFileContents:
    """Load every tensor and the metadata of a LoRA file, validating it on the way."""
    path = Path(path)
    if not path.is_file():
        raise ModelNotFoundError(f"LoRA file not found: {path}")
    suffix = path.suffix.lower()
    if suffix in SAFETENSORS_SUFFIXES:
        tensors, metadata = _read_safetensors(path)
    elif suffix in PICKLE_SUFFIXES:
        tensors, metadata = _read_pickle(path), {}
    else:
        raise CheckpointFormatError(
            f"{path}: unknown LoRA file type {suffix!r}; expected one of {', '.join(LORA_SUFFIXES)}."
        )
    if not tensors:
        raise CheckpointFormatError(f"{path}: the file holds no tensors; it is not a LoRA.")
    key = _first_non_finite(tensors)
    if key is not None:
        raise CheckpointFormatError(
            f"{path}: tensor {key!r} contains NaN or Inf values; the LoRA is broken (often a diverged "
            "training run); use another epoch of it."
        )
    return LoraFileContents(path=path, tensors=tensors, metadata=metadata)


_SAFETENSORS_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
}


def _read_safetensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Tensors as views into one read of the file: one syscall instead of one per tensor.

    LoRA files are small next to the model they modify, so holding the file once in memory is
    bounded by its size; per-tensor `safe_open` reads cost ~50 us each, which made a 30,000-key
    file take seconds.
    """
    header, offset = read_safetensors_header(path)
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict):
        raise CheckpointFormatError(f"{path}: safetensors __metadata__ is not a JSON object.")
    data = bytearray(path.stat().st_size - offset)
    with path.open("rb") as handle:
        handle.seek(offset)
        if handle.readinto(data) != len(data):
            raise CheckpointFormatError(f"{path}: the file changed while being read; try again.")
    tensors: dict[str, torch.Tensor] = {}
    raw = torch.frombuffer(data, dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
    for key, info in header.items():
        try:
            dtype = _SAFETENSORS_DTYPES[info["dtype"]]
            shape = [int(n) for n in info["shape"]]
            begin, end = (int(n) for n in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointFormatError(f"{path}: tensor {key!r} has an invalid header entry {info!r}.") from None
        count = 1
        for n in shape:
            count *= n
        itemsize = torch.empty((), dtype=dtype).element_size()
        if not 0 <= begin <= end <= len(data) or end - begin != count * itemsize:
            raise CheckpointFormatError(
                f"{path}: tensor {key!r} declares bytes {begin}..{end} for shape {shape} {info['dtype']}; "
                "the file is corrupt or truncated; re-download it."
            )
        if not count:
            tensors[str(key)] = torch.empty(shape, dtype=dtype)
            continue
        try:  # a view of the one buffer, so all tensors share a storage (see _first_non_finite)
            flat = raw[begin:end].view(dtype)
        except RuntimeError:  # offset not aligned to the element size
            flat = torch.frombuffer(data, dtype=dtype, count=count, offset=begin)
        tensors[str(key)] = flat.reshape(shape)
    return tensors, {str(k): str(v) for k, v in metadata.items()}


def _first_non_finite(tensors: dict[str, torch.Tensor]) -> str | None:
    """Key of a float tensor holding NaN/Inf, or None; one fused check per dtype, a scan only on failure."""
    by_dtype: dict[torch.dtype, list[tuple[str, torch.Tensor]]] = {}
    dtypes = {t.dtype for t in tensors.values()}
    if len(dtypes) == 1 and next(iter(dtypes)).is_floating_point:
        # Common case (one float dtype): views of one file read share a storage; check it in one pass.
        storages = {t.untyped_storage().data_ptr() for t in tensors.values()}
        if len(storages) == 1 and all(t.dtype != torch.bool for t in tensors.values()):
            dtype = next(iter(dtypes))
            storage = next(iter(tensors.values())).untyped_storage()
            if storage.nbytes() % dtype.itemsize == 0:
                whole = torch.empty(0, dtype=dtype).set_(storage, 0, (storage.nbytes() // dtype.itemsize,))
                if bool(torch.isfinite(_checkable(whole)).all()):
                    return None
    for key, tensor in tensors.items():
        if tensor.is_floating_point() and tensor.numel():
            by_dtype.setdefault(tensor.dtype, []).append((key, tensor))
    for items in by_dtype.values():
        joined = torch.cat([t.reshape(-1).float() for _, t in items])
        if not bool(torch.isfinite(joined).all()):
            return next(k for k, t in items if not bool(torch.isfinite(t.float()).all()))
    return None


def _checkable(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` in a dtype `torch.isfinite` accepts: torch implements no fp8 kernels (`F8_E4M3`/`F8_E5M2` files, as
    ComfyUI saves), so those are upcast to float32, which holds every fp8 value (NaN and Inf included) exactly."""
    return tensor.float() if tensor.element_size() == 1 else tensor


def _read_pickle(path: Path) -> dict[str, torch.Tensor]:
    """Pickle-based LoRA files through the shared loader, which scans globals before a weights-only load."""
    from mixkit.io.loading import load_state_dict

    return load_state_dict(path)
