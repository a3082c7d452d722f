"""A1111's image grid (modules/images.py `image_grid`) and its `grid-NNNN.png` numbering.

Below the web UI because scripts that draw grids (X/Y/Z plot, Prompt matrix) run from the Python API and the CLI as
well as from the server.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

GRID_PREFIX = "grid"
GRID_BACKGROUND = "#ffffff"  # A1111's default `grid_background_color`


def grid_shape(count: int, rows: int | None = None) -> tuple[int, int]:
    """(rows, columns) for `count` images: `rows` as given (at most `count`), else A1111's default `n_rows` = -1:
    rows = round(sqrt(count))."""
    if count < 1:
        raise ValueError(f"A grid needs at least one image; got {count}.")
    if rows is not None and rows < 1:
        raise ValueError(f"A grid needs at least one row; got rows={rows}.")
    rows = min(round(math.sqrt(count)) if rows is None else rows, count)
    return rows, math.ceil(count / rows)


def image_grid(images: list, rows: int | None = None):
    """The images in rows (left to right, top to bottom) on A1111's white background, each in a cell the size of the
    largest image (A1111 takes the first image's size; the largest never crops one)."""
    from PIL import Image

    rows, cols = grid_shape(len(images), rows)
    width, height = (max(sizes) for sizes in zip(*(image.size for image in images)))
    grid = Image.new("RGB", (cols * width, rows * height), GRID_BACKGROUND)
    for index, image in enumerate(images):
        grid.paste(image, box=(index % cols * width, index // cols * height))
    return grid


def next_grid_path(folder: str | os.PathLike, prefix: str = GRID_PREFIX) -> Path:
    """`<prefix>-NNNN.png` numbered on from the highest such file in `folder` (A1111's `get_next_sequence_number`;
    X/Y/Z plot's grids are `xyz_grid-NNNN.png`)."""
    folder = Path(folder)
    pattern = re.compile(rf"^{re.escape(prefix)}-(\d+)")
    numbers = [int(m.group(1)) for name in (os.listdir(folder) if folder.is_dir() else [])
               if (m := pattern.match(name))]
    return folder / f"{prefix}-{max(numbers, default=-1) + 1:04d}.png"
