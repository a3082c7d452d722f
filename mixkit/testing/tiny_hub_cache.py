"""A Hugging Face hub cache entry written by hand, for tests of what mixkit reads from the cache without the network
(the layout huggingface_hub's downloads leave: models--ORG--NAME/refs/REVISION -> snapshots/COMMIT/...)."""

from __future__ import annotations

import json
from pathlib import Path


def write_hub_cache_entry(cache: str | Path, repo_id: str, files: dict, revision: str = "main") -> Path:
    """Write `files` (repo path -> JSON value) as the cached snapshot of `repo_id` at `revision`; returns the
    snapshot folder. Point HF_HUB_CACHE at `cache` for mixkit to find it."""
    repo = Path(cache) / f"models--{repo_id.replace('/', '--')}"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / revision).write_text(commit)
    snapshot = repo / "snapshots" / commit
    for name, value in files.items():
        target = snapshot / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(value))
    return snapshot
