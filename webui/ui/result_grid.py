"""The grid of a UI result of two or more images, as A1111's `process_images` makes it for its gallery.

A1111 (modules/processing.py) builds `images.image_grid(output_images, p.batch_size)` when the result has at
least two images (`grid_only_if_multiple`) and `return_grid` or `grid_save` is on (both default True): the grid
goes first in the gallery and is saved as `grid-0000.png`, `grid-0001.png`, ... (here in `--output-dir`, whose
layout is flat). Its infotext is the first image's. The API makes no grid (A1111's API sets `do_not_save_grid`).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

GRID_PREFIX = "grid"
_GRID_NAME = re.compile(rf"^{GRID_PREFIX}-(\d+)")


def grid_shape(count: int) -> tuple[int, int]:
    """(rows, columns) for `count` images with A1111's default `n_rows` = -1: rows = round(sqrt(count))."""
    rows = min(round(math.sqrt(count)), count)
    return rows, math.ceil(count / rows)


def image_grid(images: list):
    """The images in rows (left to right, top to bottom) on A1111's default white `grid_background_color`."""
    from PIL import Image

    rows, cols = grid_shape(len(images))
    width, height = (max(sizes) for sizes in zip(*(image.size for image in images)))
    grid = Image.new("RGB", (cols * width, rows * height), "#ffffff")
    for index, image in enumerate(images):
        grid.paste(image, box=(index % cols * width, index // cols * height))
    return grid


def next_grid_path(folder: str | os.PathLike) -> Path:
    """`grid-NNNN.png` numbered on from the highest grid in `folder` (A1111's `get_next_sequence_number`)."""
    folder = Path(folder)
    numbers = [int(m.group(1)) for name in (os.listdir(folder) if folder.is_dir() else [])
               if (m := _GRID_NAME.match(name))]
    return folder / f"{GRID_PREFIX}-{max(numbers, default=-1) + 1:04d}.png"


def with_grid(paths: list[str], seeds: list, infotexts: list, grid_path: str | None) -> tuple[list, list, list]:
    """Gallery files, seeds and infotexts with the grid first (its seed and infotext are the first image's, so
    "Reuse" and "Send to" on the grid act as on the first image); unchanged when `grid_path` is None."""
    if grid_path is None:
        return paths, seeds, infotexts
    return [grid_path, *paths], [seeds[0], *seeds], [infotexts[0], *infotexts]


def grid_for_gallery(images: list, infotexts: list, *, return_grid: bool, save_to: str | os.PathLike | None,
                     cache_dir: str | os.PathLike) -> str | None:
    """Make the grid of a result of 2+ images: saved to `save_to` (when given) with the first image's infotext,
    and returned for the gallery when `return_grid` (from Gradio's cache when it was not saved); else None."""
    if len(images) < 2 or not (return_grid or save_to is not None):
        return None
    from pipelines.png import save_png
    from webui.ui.gallery_files import result_folder

    grid, infotext = image_grid(images), (infotexts[0] if infotexts else None) or None
    saved = save_png(grid, next_grid_path(save_to), infotext) if save_to is not None else None
    if not return_grid:
        return None
    if saved is None:
        saved = save_png(grid, result_folder(cache_dir, "mixkit-gallery") / f"{GRID_PREFIX}.png", infotext)
    return str(saved)
