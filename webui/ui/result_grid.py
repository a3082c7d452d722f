"""The grid of a UI result of two or more images in the gallery (the grid itself: `webui.result_grid`)."""

from __future__ import annotations

import os

from pipelines.image_grid import GRID_PREFIX, grid_shape, image_grid, next_grid_path
from webui.result_grid import wants_grid

__all__ = ["grid_for_gallery", "grid_shape", "image_grid", "next_grid_path", "with_grid"]


def with_grid(paths: list[str], seeds: list, infotexts: list, grid_path: str | None) -> tuple[list, list, list]:
    """Gallery files, seeds and infotexts with the grid first (its seed and infotext are the first image's, so
    "Reuse" and "Send to" on the grid act as on the first image); unchanged when `grid_path` is None."""
    if grid_path is None:
        return paths, seeds, infotexts
    return [grid_path, *paths], [seeds[0], *seeds], [infotexts[0], *infotexts]


def grid_for_gallery(images: list, infotexts: list, *, return_grid: bool, save_to: str | os.PathLike | None,
                     cache_dir: str | os.PathLike, writing=None) -> str | None:
    """Make the grid of a result of 2+ images: saved to `save_to` (when given) with the first image's infotext where
    `writing` says (`pipelines.png.InfotextWriting`), and returned for the gallery when `return_grid` (from Gradio's
    cache when it was not saved, its PNG chunk as `writing.pnginfo` says, never a `.txt`); else None."""
    if not wants_grid(len(images), return_grid=return_grid, grid_save=save_to is not None):
        return None
    from pipelines.png import PNG_ONLY, save_png
    from webui.ui.gallery_files import result_folder

    writing = writing or PNG_ONLY
    grid, infotext = image_grid(images), (infotexts[0] if infotexts else None) or None
    saved = save_png(grid, next_grid_path(save_to), infotext, writing=writing) if save_to is not None else None
    if not return_grid:
        return None
    if saved is None:
        saved = save_png(grid, result_folder(cache_dir, "mixkit-gallery") / f"{GRID_PREFIX}.png",
                         writing.chunk(infotext))
    return str(saved)
