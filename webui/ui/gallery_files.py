"""Gallery files for results that were not saved: PNGs carrying their infotext, as A1111's gallery images do.

Handing Gradio bare PIL images made it write `image.png` without the `parameters` chunk, so an
image downloaded from the gallery (or dropped into PNG Info) had lost its generation parameters.
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

# Results not saved to --output-dir live in Gradio's cache only as long as a page may still show them: a server that
# runs for weeks with saving off would otherwise fill its disk with every image it ever made.
KEEP_UNSAVED_SECONDS = 6 * 3600


def result_folder(cache_dir: str | Path, kind: str) -> Path:
    """A fresh folder for one unsaved result under Gradio's cache (`mixkit-gallery`, `mixkit-extras`), after removing
    that kind's folders older than KEEP_UNSAVED_SECONDS; each result gets its own so concurrent jobs never share a
    file name."""
    parent = Path(cache_dir) / kind
    prune_stale_results(parent, KEEP_UNSAVED_SECONDS)
    return parent / uuid.uuid4().hex


def prune_stale_results(parent: Path, max_age_seconds: float, now: float | None = None) -> list[Path]:
    """Remove the result folders under `parent` last modified more than `max_age_seconds` ago; returns them."""
    now = time.time() if now is None else now
    removed = []
    for folder in parent.iterdir() if parent.is_dir() else ():
        try:
            stale = folder.is_dir() and now - folder.stat().st_mtime > max_age_seconds
        except OSError:  # removed by a concurrent request meanwhile
            continue
        if stale:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def gallery_pngs(images: list, seeds: list, infotexts: list, cache_dir: str | Path, *,
                 pnginfo: bool = True) -> list[str]:
    """Write each image as `<n>-<seed>.png` with its infotext (unless `pnginfo` is off: A1111's enable_pnginfo) under
    Gradio's cache folder; returns the paths.

    Gradio serves files from its cache folder without copying them elsewhere first (`result_folder`)."""
    from pipelines.png import save_png

    folder = result_folder(cache_dir, "mixkit-gallery")
    return [str(save_png(image, folder / f"{number:05d}-{seed}.png", (infotext or None) if pnginfo else None))
            for number, (image, seed, infotext) in enumerate(zip(images, seeds, infotexts), start=1)]
