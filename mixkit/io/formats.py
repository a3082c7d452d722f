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
# What a protocol 0/1 pickle of a dict, list or object starts with: MARK, EMPTY_DICT, EMPTY_LIST,
# EMPTY_TUPLE, GLOBAL, INST; text files rarely parse past these, and an HTML page never starts so.
OLD_PROTOCOL_FIRST_OPCODES = (b"(", b"}", b"]", b")", b"c", b"i")


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


def is_old_protocol_pickle(file: Path) -> bool:
    """True if `file` parses as a protocol 0/1 pickle, which has no PROTO opcode to recognise it by.

    Such files are rare but not harmless: `pickle.dumps(obj, protocol=0)` can import `os.system` as
    well as any other. Recognising them lets the refusal name the global instead of only saying
    "not a checkpoint". Only the opcodes are read (pickletools), nothing is unpickled.
    """
    import pickletools

    with open(file, "rb") as handle:
        if handle.read(1) not in OLD_PROTOCOL_FIRST_OPCODES:
            return False
        handle.seek(0)
        try:
            for opcode, _, _ in pickletools.genops(handle):
                if opcode.proto >= 2:  # a protocol 2+ opcode without a PROTO header: not a pickle
                    return False
        except (ValueError, UnicodeDecodeError, EOFError):
            return False
    return True


def detect_checkpoint_format(path: str | os.PathLike) -> CheckpointFormat:
    """Decide whether `path` holds safetensors, a torch zip archive or a (legacy or plain) pickle stream."""
    file = check_checkpoint_file(path)
    with open(file, "rb") as handle:
        head = handle.read(16)
    detected = format_from_leading_bytes(head)
    if detected is None and is_old_protocol_pickle(file):
        detected = "pickle"
    if detected is None:
        raise CheckpointFormatError(
            f"{str(file)!r} is not a recognised checkpoint (first bytes {head[:16].hex(' ')}): expected "
            "safetensors (8-byte header length + JSON), a torch zip archive (PK\\x03\\x04) or a pickle "
            "(\\x80). The file may be truncated, an HTML error page, or another format; re-download it."
        )
    return detected
