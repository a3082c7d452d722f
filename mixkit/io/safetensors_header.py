"""Read and validate a safetensors header without touching the tensor bytes.

Layout (safetensors spec): 8-byte little-endian header length N, N bytes of JSON mapping each
tensor name to {dtype, shape, data_offsets: [begin, end]} relative to byte 8 + N, plus an optional
"__metadata__" str -> str map. Checking the offsets against the file size here turns a download
cut short into "truncated, re-download" instead of a low-level error deep inside a load.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from mixkit.errors import CheckpointFormatError
from mixkit.io.formats import SAFETENSORS_MAX_HEADER_BYTES, check_checkpoint_file

METADATA_KEY = "__metadata__"

# Bytes per element; dtypes missing here (sub-byte float formats) skip the size check only.
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "U16": 2, "I16": 2, "F16": 2, "BF16": 2,
    "U32": 4, "I32": 4, "F32": 4,
    "U64": 8, "I64": 8, "F64": 8, "C64": 8,
}
# The format's sub-byte and FNUZ dtypes (safetensors >= 0.6): valid names without a whole-byte element size
OTHER_DTYPES = frozenset({"F4", "F6_E2M3", "F6_E3M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"})


def read_safetensors_header(path: str | os.PathLike) -> dict:
    """Return the parsed JSON header of a safetensors file after checking it against the file size."""
    file = check_checkpoint_file(path)
    file_size = file.stat().st_size
    with open(file, "rb") as handle:
        length_bytes = handle.read(8)
        if len(length_bytes) < 8:
            raise _corrupt(file, f"it is only {file_size} bytes long, shorter than the 8-byte header length")
        header_length = int.from_bytes(length_bytes, "little")
        if header_length > SAFETENSORS_MAX_HEADER_BYTES:
            raise _corrupt(file, f"its header length field says {header_length} bytes (the limit is "
                                 f"{SAFETENSORS_MAX_HEADER_BYTES})")
        if 8 + header_length > file_size:
            raise _corrupt(file, f"its header needs {header_length} bytes but only {file_size - 8} follow; "
                                 "the file is truncated")
        raw_header = handle.read(header_length)
    try:
        header = json.loads(raw_header.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _corrupt(file, f"its header is not valid UTF-8 JSON ({error})") from None
    if not isinstance(header, dict):
        raise _corrupt(file, f"its header is JSON {type(header).__name__}, expected an object")
    _check_entries(file, header, data_size=file_size - 8 - header_length)
    return header


def read_safetensors_metadata(path: str | os.PathLike) -> dict[str, str]:
    """Return the `__metadata__` map of a safetensors file (training info, hashes) without loading tensors."""
    return dict(read_safetensors_header(path).get(METADATA_KEY) or {})


def tensor_entries(header: dict) -> dict[str, dict]:
    """The tensor part of a parsed header (everything except `__metadata__`)."""
    return {name: entry for name, entry in header.items() if name != METADATA_KEY}


def _check_entries(file: Path, header: dict, data_size: int) -> None:
    metadata = header.get(METADATA_KEY)
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
        ):
            raise _corrupt(file, f"its {METADATA_KEY!r} must map strings to strings, got {metadata!r:.200}")
    for name, entry in tensor_entries(header).items():
        if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= set(entry):
            raise _corrupt(file, f"tensor {name!r} lacks dtype/shape/data_offsets: {entry!r:.200}")
        offsets, shape, dtype = entry["data_offsets"], entry["shape"], entry["dtype"]
        if not isinstance(dtype, str) or (dtype not in DTYPE_BYTES and dtype not in OTHER_DTYPES):
            raise _corrupt(file, f"tensor {name!r} has unknown dtype {dtype!r:.100} (the format's are "
                                 f"{', '.join(sorted([*DTYPE_BYTES, *OTHER_DTYPES]))})")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)
                and offsets[0] <= offsets[1]):
            raise _corrupt(file, f"tensor {name!r} has invalid data_offsets {offsets!r}")
        if not (isinstance(shape, list) and all(_is_count(d) for d in shape)):
            raise _corrupt(file, f"tensor {name!r} has invalid shape {shape!r}")
        if offsets[1] > data_size:
            raise _corrupt(file, f"tensor {name!r} ends at data byte {offsets[1]} but the file holds only "
                                 f"{data_size} data bytes; the file is truncated")
        item_bytes = DTYPE_BYTES.get(dtype)
        if item_bytes is not None and math.prod(shape) * item_bytes != offsets[1] - offsets[0]:
            raise _corrupt(file, f"tensor {name!r} ({dtype}, shape {shape}) needs "
                                 f"{math.prod(shape) * item_bytes} bytes but data_offsets span "
                                 f"{offsets[1] - offsets[0]}")


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _corrupt(file: Path, reason: str) -> CheckpointFormatError:
    return CheckpointFormatError(
        f"safetensors file {str(file)!r} is truncated or corrupt: {reason}. Re-download or re-export it."
    )
