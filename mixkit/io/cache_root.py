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
    return Path(os.environ.get(CACHE_DIR_ENV) or Path.home() / ".cache" / "mixkit").expanduser()
