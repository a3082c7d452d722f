"""A small JSON cache of file hashes, so a multi-GB checkpoint is hashed once, not at every start.

Entries are keyed by the resolved absolute path and are valid only while the file's size and
modification time (ns) are unchanged, the same rule A1111 uses for its `cache.json`. The cache is
an optimisation only: an unreadable or unwritable cache file is ignored (with a warning), never an
error, and it is replaced atomically so concurrent processes can at worst lose an entry. A cache root that is a
file (`cache_root` refuses it) is ignored the same way, its warning naming `$MIXKIT_CACHE_DIR`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from mixkit.io.atomic import atomic_write_bytes
from mixkit.io.cache_root import cache_root

logger = logging.getLogger(__name__)

CACHE_FILE_NAME = "hashes.json"
CACHE_VERSION = 1


def hash_cache_file() -> Path:
    """Where hashes are cached: `$MIXKIT_CACHE_DIR/hashes.json`, else `~/.cache/mixkit/hashes.json`."""
    return cache_root() / CACHE_FILE_NAME


def _file_key(path: Path) -> tuple[str, dict[str, int]]:
    resolved = path.resolve()
    stat = resolved.stat()
    return str(resolved), {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def cached_hash(path: Path, kind: str) -> str | None:
    """The cached `kind` hash of `path` if the file has not changed since it was stored."""
    key, identity = _file_key(path)
    entry = _read_entries().get(key)
    if not isinstance(entry, dict) or any(entry.get(field) != value for field, value in identity.items()):
        return None
    value = entry.get(kind)
    return value if isinstance(value, str) else None


def store_hash(path: Path, kind: str, value: str) -> None:
    """Remember `value` as the `kind` hash of `path` in its current size/mtime state."""
    key, identity = _file_key(path)
    entries = _read_entries()
    entry = entries.get(key)
    if not isinstance(entry, dict) or any(entry.get(field) != v for field, v in identity.items()):
        entry = dict(identity)  # the file changed: its other hashes are stale too
    entry[kind] = value
    entries[key] = entry
    try:
        cache_file = hash_cache_file()
    except NotADirectoryError as error:  # the cache root is a file: say so, but hashing goes on
        logger.warning("Could not update the hash cache: %s Hashes will be recomputed next time.", error)
        return
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        payload = {"version": CACHE_VERSION, "entries": entries}
        atomic_write_bytes(cache_file, json.dumps(payload, indent=1, sort_keys=True).encode("utf-8"))
    except OSError as error:
        logger.warning("Could not update the hash cache %s (%s); hashes will be recomputed next time.", cache_file, error)


def _read_entries() -> dict:
    try:
        cache_file = hash_cache_file()
    except NotADirectoryError:
        return {}  # store_hash warns about it
    try:
        payload = json.loads(cache_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        logger.warning("Ignoring unreadable hash cache %s (%s); it will be rebuilt.", cache_file, error)
        return {}
    if not isinstance(payload, dict) or payload.get("version") != CACHE_VERSION or not isinstance(payload.get("entries"), dict):
        return {}
    return payload["entries"]
