"""The grid of a result of two or more images, as A1111's `process_images` makes it (for the UI and the API).

A1111 (modules/processing.py) builds `images.image_grid(output_images, p.batch_size)` when the result has at
least two images (`grid_only_if_multiple`), `return_grid` or `grid_save` is on (both default True) and the request
did not set `do_not_save_grid`: `return_grid` puts it first among the result's images with the first image's
infotext (`index_of_first_image` 1), `grid_save` saves it as `grid-0000.png`, `grid-0001.png`, ... (here in
`--output-dir`, whose layout is flat). A1111's API sets `do_not_save_grid = not save_images`, so only an API request
with `save_images: true` gets one.
"""

from __future__ import annotations

import os

from pipelines.image_grid import GRID_PREFIX, grid_shape, image_grid, next_grid_path

__all__ = ["GRID_PREFIX", "api_result_grid", "grid_shape", "image_grid", "next_grid_path", "wants_grid"]


def wants_grid(count: int, *, return_grid: bool, grid_save: bool) -> bool:
    """A1111's condition for making a grid of a result of `count` images (`grid_only_if_multiple` on)."""
    return count >= 2 and (return_grid or grid_save)


def api_result_grid(images: list, infotexts: list, *, return_grid: bool, save_to: str | os.PathLike | None,
                    writing=None):
    """The grid of an API result that asked to be saved: saved to `save_to` (when given, i.e. `grid_save` is on) with
    the first image's infotext where `writing` says (`pipelines.png.InfotextWriting`; A1111's save_image gives a grid
    its `.txt` too); returned, to go first in the response, when `return_grid`; else None."""
    if not wants_grid(len(images), return_grid=return_grid, grid_save=save_to is not None):
        return None
    from pipelines.png import PNG_ONLY, save_png

    grid = image_grid(images)
    if save_to is not None:
        save_png(grid, next_grid_path(save_to), (infotexts[0] if infotexts else None) or None,
                 writing=writing or PNG_ONLY)
    return grid if return_grid else None
