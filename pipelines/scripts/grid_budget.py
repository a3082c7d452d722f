"""The size of a script's grid, known from the params of its calls before anything is generated.

A1111 refuses a grid over `img_max_size_mp` (200 megapixels) when it draws it, after the work. The scripts check it
first, from what each call will return: its images' final size (hires fix's upscaled size, not the first pass's) and
how many (batch size x batch count). `image_grid` gives every cell the largest cell's size, so a Size axis of
64x2048 and 2048x64 makes 2048x2048 cells: the budget counts cells at the largest width and the largest height.
"""

from __future__ import annotations

MAX_GRID_MEGAPIXELS = 200  # A1111's img_max_size_mp default


def output_size(params) -> tuple[int, int]:
    """The width and height of the images a call with `params` returns (hires fix: its upscaled size)."""
    if hasattr(params, "hr_scale"):
        from pipelines.hires import hires_target_size

        try:
            return hires_target_size(params)
        except (ValueError, TypeError, OverflowError):
            pass  # a bad hr_scale / hr_resize: the pipeline's check refuses it, naming the field, before any work
    return params.width, params.height


def images_per_call(params) -> int:
    return params.batch_size * params.batch_count


def batch_grid_size(params) -> tuple[int, int]:
    """The size of one call's images as one grid cell (a cell of a batch shows the batch's grid, `image_grid`)."""
    from pipelines.image_grid import grid_shape

    width, height = output_size(params)
    rows, cols = grid_shape(images_per_call(params))
    return cols * width, rows * height


def check_grid_size(what: str, cell_sizes: list[tuple[int, int]], advice: str) -> None:
    """ValueError when a grid of these cells (each drawn at the largest width and height) passes the cap."""
    if not cell_sizes:
        return
    width = max(size[0] for size in cell_sizes)
    height = max(size[1] for size in cell_sizes)
    megapixels = len(cell_sizes) * width * height / 1_000_000
    if megapixels > MAX_GRID_MEGAPIXELS:
        raise ValueError(f"{what} grid would be about {round(megapixels)} megapixels, more than {MAX_GRID_MEGAPIXELS} "
                         f"(A1111's img_max_size_mp): {len(cell_sizes)} cells of {width}x{height}; {advice}.")
