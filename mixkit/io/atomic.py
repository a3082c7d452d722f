"""Write a file so that readers see either the old content or the complete new one, never a mix.

The new content goes to a temporary file in the destination folder (same filesystem, so the final
`os.replace` is an atomic rename), is fsync'ed, and only then replaces the target. Any failure
(permission, disk full, a serializer error) removes the temporary file and leaves the old file
untouched. A crash mid-write leaves at most a hidden `.<name>.*.tmp` file, never a bad checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

from mixkit.errors import MixkitError

# mkstemp creates files 0600; a saved model should be as readable as one written with open().
DEFAULT_FILE_MODE = 0o644


class CheckpointWriteError(MixkitError, OSError):
    """A file could not be written; nothing was changed on disk."""


@contextlib.contextmanager
def atomic_output_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path to write to; on normal exit it atomically becomes `path`."""
    target = Path(path).expanduser().absolute()
    folder = target.parent
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        raise CheckpointWriteError(f"Cannot write {str(target)!r}: the folder {str(folder)!r} {what}; "
                                   "create the folder or choose another output path.")
    if target.is_dir():
        raise CheckpointWriteError(f"Cannot write {str(target)!r}: a folder with that name exists; choose a file name.")
    try:
        handle, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as error:
        raise CheckpointWriteError(f"Cannot write to folder {str(folder)!r} ({error.strerror or error}); "
                                   "check its permissions or choose another output path.") from None
    os.close(handle)
    temp = Path(temp_name)
    try:
        yield temp
        _fsync_file(temp)
        os.chmod(temp, target.stat().st_mode & 0o7777 if target.exists() else DEFAULT_FILE_MODE)
        os.replace(temp, target)
    except BaseException as error:
        with contextlib.suppress(OSError):
            temp.unlink()
        if isinstance(error, OSError) and not isinstance(error, MixkitError):
            raise CheckpointWriteError(
                f"Writing {str(target)!r} failed ({error.strerror or error}); the previous file, if any, is unchanged. "
                "Check free disk space and permissions."
            ) from error
        raise
    _fsync_folder(folder)


def publish_permissions(folder: str | os.PathLike) -> None:
    """Give a finished output folder the permissions `open()`/`mkdir()` would have: the temporary folders
    outputs are staged in are 0700 (`mkdtemp`), and safetensors' `save_file` (so every `save_pretrained`)
    writes 0600 files, which other users of a shared machine could then not load."""
    umask = os.umask(0)
    os.umask(umask)
    root = Path(folder)
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~umask)


def check_new_output_folder(path: str | os.PathLike, what: str = "Output") -> None:
    """Refuse a folder output that exists and is not empty: a trained model or dataset never overwrites another.
    Called before the work that fills it, so a taken name costs nothing."""
    target = Path(path).expanduser()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ValueError(f"{what} {str(target)!r} already exists and is not an empty folder; choose a new one "
                         "(nothing mixkit writes replaces what is there).")
    existing = target.absolute().parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():  # found now, not by the write at the end of a long run
        raise ValueError(f"{what} {str(target)!r} cannot be created: {str(existing)!r} is a file; choose another path.")


@contextlib.contextmanager
def atomic_output_folder(path: str | os.PathLike, *, replace: bool = False) -> Iterator[Path]:
    """Yield a hidden temporary folder beside `path`; on normal exit it becomes `path` in one rename.

    The folder version of `atomic_output_path`: readers (and a crashed run's next attempt) see no folder or
    the complete one, never half a model. `path` must be missing or empty (see `check_new_output_folder`)
    unless `replace` (a recipe rebuilding its own output): the old folder is then moved aside and deleted only
    once the new one is in place. On any error the temporary folder is removed and the old one stays.
    """
    import shutil

    target = Path(path).expanduser().absolute()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    except OSError as error:  # named by the folder asked for, not by the hidden staging name that failed
        raise PermissionError(f"Output folder {str(target)!r} is not writable ({error.strerror or error}); "
                              "choose another.") from None
    try:
        yield temp
        publish_permissions(temp)
        if replace and target.is_dir() and any(target.iterdir()):
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
            os.replace(target, old)  # onto the empty folder just made: an atomic swap of names
            os.replace(temp, target)
            shutil.rmtree(old, ignore_errors=True)
            return
        check_new_output_folder(target)  # nothing else may have filled it meanwhile
        if target.exists():
            target.rmdir()
        os.replace(temp, target)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Atomically replace `path` with `data`."""
    with atomic_output_path(path) as temp:
        temp.write_bytes(data)


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def _fsync_folder(folder: Path) -> None:
    # Makes the rename itself durable; not supported on every platform/filesystem, hence best effort.
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
