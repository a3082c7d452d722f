"""Tell what a checkpoint file is from its first bytes, never from its extension.

Extensions lie: community sites rename pickles to `.safetensors`, and `.bin`/`.pt`/`.ckpt` are
used for both torch's zip format and the legacy pickle stream. Deciding by content means a renamed
pickle still goes through the (refusing) pickle path instead of confusing the safetensors reader.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from mixkit.errors import CheckpointFormatError, ModelNotFoundError

CheckpointFormat = Literal["safetensors", "torch-zip", "pickle"]

ZIP_MAGIC = b"PK\x03\x04"
PICKLE_PROTO_OPCODE = 0x80
# safetensors refuses headers above 100 MB; a real header is KBs. The bound also keeps a pickle
# whose first 8 bytes happen to decode to a small integer from looking like a safetensors file.
SAFETENSORS_MAX_HEADER_BYTES = 100_000_000


def check_checkpoint_file(path: str | os.PathLike) -> Path:
    """Return `path` as a Path after checking it is an existing, non-empty regular file."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"checkpoint path must be a str or os.PathLike, got {type(path).__name__}: {path!r}")
    file = Path(path).expanduser()
    if not file.exists():
        raise ModelNotFoundError(f"Checkpoint file {str(file)!r} does not exist; check the path or download the file.")
    if file.is_dir():
        raise CheckpointFormatError(
            f"{str(file)!r} is a folder, not a checkpoint file; pass the .safetensors/.ckpt file inside it "
            "(or load the folder as a diffusers model)."
        )
    if file.stat().st_size == 0:
        raise CheckpointFormatError(f"Checkpoint file {str(file)!r} is empty (0 bytes); re-download it.")
    return file


def format_from_leading_bytes(head: bytes) -> CheckpointFormat | None:
    """The checkpoint format that `head` (the file's first >= 9 bytes) announces, or None."""
    # safetensors is tested first: its 8-byte length can start with 0x80 (e.g. a 384-byte header).
    if len(head) >= 9 and head[8:9] == b"{":
        header_length = int.from_bytes(head[:8], "little")
        if 2 <= header_length <= SAFETENSORS_MAX_HEADER_BYTES:
            return "safetensors"
    if head.startswith(ZIP_MAGIC):
        return "torch-zip"
    if head[:1] == bytes([PICKLE_PROTO_OPCODE]):
        return "pickle"
    return None


def detect_checkpoint_format(path: str | os.PathLike) -> CheckpointFormat:
    """Decide whether `path` holds safetensors, a torch zip archive or a legacy pickle stream."""
    file = check_checkpoint_file(path)
    with open(file, "rb") as handle:
        head = handle.read(16)
    detected = format_from_leading_bytes(head)
    if detected is None:
        raise CheckpointFormatError(
            f"{str(file)!r} is not a recognised checkpoint (first bytes {head[:16].hex(' ')}): expected "
            "safetensors (8-byte header length + JSON), a torch zip archive (PK\\x03\\x04) or a pickle "
            "(\\x80). The file may be truncated, an HTML error page, or another format; re-download it."
        )
    return detected
