"""The model hashes the Stable Diffusion ecosystem shows in infotexts and model lists.

- `sha256_file`: full SHA-256 (what Civitai and A1111 >= 1.0 store).
- `a1111_model_hash`: its first 10 hex digits, A1111's "Model hash:" infotext field.
- `addnet_hash_safetensors`: SHA-256 of the bytes after the safetensors header (8 + header length),
  so editing metadata does not change it; kohya writes the full digest as `sshs_model_hash`, and
  A1111 shows its first 12 hex digits in "Lora hashes:".
- `legacy_a1111_hash`: SHA-256 of 0x10000 bytes at offset 0x100000, first 8 hex digits; A1111's
  pre-2023 "Model hash" (and kohya's `sshs_legacy_hash`), still found in old infotexts.
The two full-file digests are cached on disk (see `hash_cache`), the legacy one reads 64 KiB.
`model_hash_matches` tells which of them an infotext's "Model hash" is and compares with it.
"""

from __future__ import annotations

import hashlib
import os
from typing import BinaryIO, Callable

from mixkit.io.formats import check_checkpoint_file, detect_checkpoint_format
from mixkit.io.hash_cache import cached_hash, store_hash
from mixkit.io.safetensors_header import read_safetensors_header

CHUNK_BYTES = 1 << 20
A1111_HASH_LENGTH = 10
ADDNET_SHORT_HASH_LENGTH = 12
LEGACY_OFFSET = 0x100000
LEGACY_LENGTH = 0x10000
LEGACY_HASH_LENGTH = 8


def _sha256_stream(handle: BinaryIO) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
        digest.update(chunk)
    return digest.hexdigest()


def _cached_digest(file, kind: str, use_cache: bool, compute: Callable[[], str]) -> str:
    """`compute()`, or its value for this file version from the hash cache (stored there after computing)."""
    if use_cache and (hit := cached_hash(file, kind)) is not None:
        return hit
    value = compute()
    if use_cache:
        store_hash(file, kind, value)
    return value


def sha256_file(path: str | os.PathLike, *, use_cache: bool = True) -> str:
    """Full hex SHA-256 of a file, streamed in 1 MiB chunks and cached by path, size and mtime."""
    file = check_checkpoint_file(path)

    def compute() -> str:
        with open(file, "rb") as handle:
            return _sha256_stream(handle)

    return _cached_digest(file, "sha256", use_cache, compute)


def a1111_model_hash(path: str | os.PathLike, *, use_cache: bool = True) -> str:
    """A1111's "Model hash" infotext value: the first 10 hex digits of the file's SHA-256."""
    return sha256_file(path, use_cache=use_cache)[:A1111_HASH_LENGTH]


def addnet_sha256_safetensors(path: str | os.PathLike, *, use_cache: bool = True) -> str:
    """Full hex SHA-256 of a safetensors file's tensor bytes (kohya's `sshs_model_hash`)."""
    file = check_checkpoint_file(path)
    if detect_checkpoint_format(file) != "safetensors":
        raise ValueError(
            f"{str(file)!r} is not a safetensors file; the addnet hash is only defined for safetensors. "
            "Use sha256_file for other formats."
        )

    def compute() -> str:
        read_safetensors_header(file)  # refuses truncated files instead of hashing a partial download
        with open(file, "rb") as handle:
            header_length = int.from_bytes(handle.read(8), "little")
            handle.seek(8 + header_length)
            return _sha256_stream(handle)

    return _cached_digest(file, "addnet_sha256", use_cache, compute)


def addnet_hash_safetensors(path: str | os.PathLike, *, use_cache: bool = True) -> str:
    """The short addnet hash A1111 prints in "Lora hashes:": first 12 hex digits of the tensor-bytes SHA-256."""
    return addnet_sha256_safetensors(path, use_cache=use_cache)[:ADDNET_SHORT_HASH_LENGTH]


def legacy_a1111_hash(path: str | os.PathLike) -> str:
    """A1111's old "Model hash": SHA-256 of the 64 KiB at offset 1 MiB, first 8 hex digits.

    Files shorter than 1 MiB hash whatever the read returns (possibly nothing), as A1111 did.
    """
    file = check_checkpoint_file(path)
    with open(file, "rb") as handle:
        handle.seek(LEGACY_OFFSET)
        return hashlib.sha256(handle.read(LEGACY_LENGTH)).hexdigest()[:LEGACY_HASH_LENGTH]


def model_hash_matches(written: str, path: str | os.PathLike) -> bool:
    """Whether an infotext's "Model hash" names the checkpoint file at `path`.

    8 hex digits are A1111's legacy hash (pre-2023 infotexts; A1111 keeps it among a checkpoint's ids and matches
    it), anything else a prefix of the file's sha256 (10 digits since A1111 1.0, or the full digest).
    """
    if not isinstance(written, str):
        raise TypeError(f"a Model hash must be a string of hex digits, got {type(written).__name__}")
    value = written.strip().lower()
    if not value:
        return False
    if len(value) == LEGACY_HASH_LENGTH:
        return legacy_a1111_hash(path) == value
    return sha256_file(path).startswith(value)
