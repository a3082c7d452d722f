"""Name the Python globals a pickled checkpoint would import, without unpickling it.

torch's `weights_only=True` unpickler is what actually keeps code from running; this static scan
exists so the refusal can say *which* callables the file wanted (`posix.system`,
`pytorch_lightning...ModelCheckpoint`), which tells the user whether it is malware or just a
training-framework object. torch's own `get_unsafe_globals_in_checkpoint` only reads zip archives
and only the protocol-2 GLOBAL opcode; plain `pickle.dump` files use STACK_GLOBAL, hence this scan.
"""

from __future__ import annotations

import io
import pickletools
import zipfile
from pathlib import Path
from typing import BinaryIO, Iterable

from mixkit.errors import CheckpointFormatError

DYNAMIC_GLOBAL = "<global built at load time>"
_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING", "STRING"}
_GET_OPS = {"GET", "BINGET", "LONG_BINGET"}
_PUT_OPS = {"PUT", "BINPUT", "LONG_BINPUT"}
# The legacy torch.save stream is several pickles in a row (magic number, protocol, sys info,
# the object, storage keys) followed by raw storage bytes; only the first four can hold globals.
_LEGACY_PICKLES_TO_SCAN = 5


def globals_in_pickle(stream: BinaryIO) -> list[str]:
    """Return `module.name` for every global the next pickle in `stream` imports, in file order."""
    found: list[str] = []
    memo: dict[int, object] = {}
    recent: list[object] = []  # the values of the latest string pushes, for STACK_GLOBAL
    last_pushed: object = None
    for opcode, arg, _ in pickletools.genops(stream):
        name = opcode.name
        pushed: object = None
        if name in ("GLOBAL", "INST"):
            module, _, attr = str(arg).partition(" ")
            found.append(python3_name(module, attr))
        elif name == "STACK_GLOBAL":
            module, attr = (recent[-2], recent[-1]) if len(recent) >= 2 else (None, None)
            ok = isinstance(module, str) and isinstance(attr, str)
            found.append(f"{module}.{attr}" if ok else DYNAMIC_GLOBAL)
        elif name in _STRING_OPS:
            pushed = arg.decode("latin-1") if isinstance(arg, bytes) else arg
            recent.append(pushed)
        elif name in _GET_OPS:
            pushed = memo.get(arg)
            recent.append(pushed)
        elif name in _PUT_OPS:
            memo[arg] = last_pushed
        elif name == "MEMOIZE":
            memo[len(memo)] = last_pushed
        if name not in _PUT_OPS and name != "MEMOIZE":
            last_pushed = pushed
    return found


def python3_name(module: str, attr: str) -> str:
    """`module.attr` as the unpickler resolves a GLOBAL opcode: Python 2 names (`__builtin__.set`, which
    protocol 0-2 pickles such as torch.save's write) mapped to Python 3 ones (`builtins.set`).

    torch's weights-only unpickler applies this mapping (torch._utils.IMPORT_MAPPING / NAME_MAPPING, adapted
    from the standard library's _compat_pickle) before its allow-list check, so the scan must too.
    """
    import_mapping, name_mapping = _compat_mappings()
    if (module, attr) in name_mapping:
        module, attr = name_mapping[(module, attr)]
    elif module in import_mapping:
        module = import_mapping[module]
    return f"{module}.{attr}"


def _compat_mappings() -> tuple[dict, dict]:
    try:
        from torch._utils import IMPORT_MAPPING, NAME_MAPPING  # what torch's weights-only unpickler uses
    except ImportError:
        from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING
    return IMPORT_MAPPING, NAME_MAPPING


def globals_in_checkpoint(path: Path, checkpoint_format: str) -> list[str]:
    """All globals imported by a torch zip archive or a legacy pickle stream, deduplicated, in order."""
    try:
        if checkpoint_format == "torch-zip":
            return _unique(_zip_globals(path))
        return _unique(_legacy_globals(path))
    except (zipfile.BadZipFile, EOFError, ValueError, KeyError, OSError) as error:
        raise CheckpointFormatError(
            f"{str(path)!r} looks like a {checkpoint_format} checkpoint but cannot be read ({error}); "
            "it is truncated or corrupt. Re-download it."
        ) from None


def unsafe_globals(found: Iterable[str], allowed: set[str]) -> list[str]:
    """The globals in `found` that the weights-only unpickler does not allow."""
    return [name for name in found if name not in allowed]


def torch_allowed_globals() -> set[str] | None:
    """The `module.name` strings torch's weights-only unpickler accepts, or None if torch hides them.

    These are private torch helpers (the same ones `torch.serialization.get_unsafe_globals_in_checkpoint`
    uses); if a torch release removes them we only lose the names in the message, not the safety.
    """
    try:
        from torch import _weights_only_unpickler as unpickler

        return set(unpickler._get_allowed_globals()) | set(unpickler._get_user_allowed_globals())
    except (ImportError, AttributeError):
        return None


def _zip_globals(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as archive:
        pickles = [name for name in archive.namelist() if name.endswith(".pkl")]
        if not pickles:
            raise ValueError("the zip archive holds no .pkl record, so it is not a torch.save checkpoint")
        found: list[str] = []
        for name in pickles:
            found += globals_in_pickle(io.BytesIO(archive.read(name)))
        return found


def _legacy_globals(path: Path) -> list[str]:
    found: list[str] = []
    with open(path, "rb") as handle:
        for index in range(_LEGACY_PICKLES_TO_SCAN):
            start = handle.tell()
            # protocol >= 2 pickles start with PROTO; raw bytes follow the last. The first one may also be a
            # protocol 0/1 pickle (no PROTO), which formats.is_old_protocol_pickle has already recognised.
            if index and handle.read(1) != b"\x80":
                break
            handle.seek(start)
            try:
                found += globals_in_pickle(handle)
            except ValueError:
                if index == 0:
                    raise
                break  # raw storage bytes that happened to start with 0x80
    return found


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))
