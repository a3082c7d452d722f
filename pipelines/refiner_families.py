"""The two families a single-file refiner's configs are chosen and checked by: the refiner file's (from its tensor
names and shapes) and a configs folder's (from its UNet and text encoder configs), each read once per version.

Both are read before any model loads (`pipelines.refiner_configs`), and again by every check of the same call: the
HTTP API's conversion, the pipeline's `check_inputs`, and each cell of an X/Y/Z plot. Reading a configs folder parses
its JSON files and builds its tokenizers; a pickled `.ckpt` has no header and is unpickled (safely, onto the meta
device: `mixkit.io.checkpoint_shapes`) to learn its keys. So each answer is remembered under a stamp of what it was
read from: the resolved path and the size and modification time of every file read. An edited config, a replaced
checkpoint or a folder that gained its tokenizer is read again; a failed read is not remembered, so a folder being
fixed is read afresh on the next call.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from mixkit.models.diffusion.family import ModelFamily

# The subfolders `read_model_configs` reads, and the kinds of files it reads in them (never the weights).
CONFIG_SUBFOLDERS = ("unet", "vae", "scheduler", "text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2")
CONFIG_SUFFIXES = (".json", ".txt")
CACHED_ENTRIES = 32  # distinct (file or folder, version) pairs remembered; a server sees a handful


def single_file_family(path: str | os.PathLike) -> ModelFamily:
    """The `ModelFamily` of a single-file checkpoint (`.safetensors` or a pickled `.ckpt`), from its tensor names and
    shapes, without loading its weights; the loader's own error, naming the file, for one that is no SD checkpoint or
    a pickle that imports code."""
    file = Path(path).expanduser()
    stat = file.stat()
    return _file_family(str(file.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=CACHED_ENTRIES)
def _file_family(file: str, size: int, mtime_ns: int) -> ModelFamily:
    from mixkit.io.key_shapes import checkpoint_shapes
    from mixkit.models.diffusion.detect_keys import detect_family, normalize_legacy_keys

    return detect_family(normalize_legacy_keys(checkpoint_shapes(file)), file)


def configs_family(folder: str | os.PathLike) -> ModelFamily:
    """The family the configs of diffusers folder `folder` describe (`read_model_configs`: FileNotFoundError /
    ValueError naming a missing or broken file)."""
    given = Path(folder).expanduser()
    return _configs_family(str(given), str(given.resolve()), configs_stamp(given))


@functools.lru_cache(maxsize=CACHED_ENTRIES)
def _configs_family(given: str, resolved: str, stamp: tuple) -> ModelFamily:
    # `resolved` and `stamp` are the cache key: the same folder reached by another spelling, and its version
    from mixkit.models.diffusion.single_file_configs import read_model_configs

    return read_model_configs(given).family  # `given`: errors name the folder as the user wrote it


def configs_stamp(folder: Path) -> tuple:
    """(subfolder/file, size, mtime_ns) of every config and tokenizer file a configs read would see: a change to any
    of them, or one added or removed, makes another stamp."""
    stamp = []
    for name in CONFIG_SUBFOLDERS:
        sub = folder / name
        if not sub.is_dir():
            continue
        for entry in sorted(os.scandir(sub), key=lambda entry: entry.name):
            if entry.is_file() and entry.name.endswith(CONFIG_SUFFIXES):
                stat = entry.stat()
                stamp.append((f"{name}/{entry.name}", stat.st_size, stat.st_mtime_ns))
    return tuple(stamp)
