"""The one folder for everything mixkit caches on disk: `$MIXKIT_CACHE_DIR`, else `~/.cache/mixkit`.

Inside it: `hashes.json` (model file hashes), `openvino/` (converted and int8 graphs, compiled
blobs), `compile/` (inductor's kernels), `world_tensors/` (rendered shapes-world datasets) and `latents/`
(the SD trainers' `cache_latents_to_disk`).
`mixkit cache list` / `mixkit cache clear` (`mixkit.io.cache_inventory`) show and remove them.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_DIR_ENV = "MIXKIT_CACHE_DIR"
# Folder and file names of the layout above: written by their producers, read by `mixkit cache list`.
WORLD_TENSORS_FOLDER = "world_tensors"
LATENTS_FOLDER = "latents"
LATENTS_DESCRIPTION = "about.json"  # in each latents/<encoder fingerprint>/: what made it


def cache_root() -> Path:
    """The cache folder (it need not exist yet). Raises NotADirectoryError, naming `$MIXKIT_CACHE_DIR` when it is
    set, if the path or one of its parents is a file: the cache would otherwise read as empty, and every
    write to it fail, with no word about why."""
    configured = os.environ.get(CACHE_DIR_ENV)
    root = Path(configured or Path.home() / ".cache" / "mixkit").expanduser()
    existing = root
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        where = f"{CACHE_DIR_ENV}={configured}" if configured else f"The cache folder {root}"
        blocked = "is a file" if existing == root else f"cannot be created: {existing} is a file"
        raise NotADirectoryError(f"{where} {blocked}, not a folder; point {CACHE_DIR_ENV} at a folder (it is "
                                 "created when needed) or unset it for ~/.cache/mixkit.")
    return root
