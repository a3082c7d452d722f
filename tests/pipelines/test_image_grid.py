"""A1111's image grid (modules/images.py `image_grid`) and grid-NNNN.png numbering."""

from __future__ import annotations

import pytest
from PIL import Image

from pipelines.image_grid import grid_shape, image_grid, next_grid_path


@pytest.mark.parametrize("count, shape", [(2, (1, 2)), (3, (2, 2)), (4, (2, 2)), (5, (2, 3)), (6, (2, 3)),
                                          (7, (3, 3)), (9, (3, 3)), (10, (3, 4))])
def test_grid_shape_is_a1111s_default(count, shape):
    # A1111 image_grid with n_rows = -1: rows = round(sqrt(len(imgs))), at most len(imgs); cols = ceil(len / rows).
    assert grid_shape(count) == shape


def test_images_fill_the_grid_row_by_row_on_white():
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255)]
    grid = image_grid([Image.new("RGB", (8, 4), c) for c in colours])
    assert grid.size == (16, 8)
    assert [grid.getpixel(xy) for xy in ((1, 1), (9, 1), (1, 5), (9, 5))] == [*colours, (255, 255, 255)]


def test_grids_are_numbered_on_from_the_highest(tmp_path):
    assert next_grid_path(tmp_path).name == "grid-0000.png"
    for name in ("grid-0003.png", "00007-12.png", "grid-0001.png", "gridiron.png"):
        (tmp_path / name).write_bytes(b"")
    assert next_grid_path(tmp_path).name == "grid-0004.png"
    assert next_grid_path(tmp_path / "missing").name == "grid-0000.png"


def test_rows_can_be_given_and_never_exceed_the_images():
    assert grid_shape(6, rows=3) == (3, 2)
    assert grid_shape(2, rows=5) == (2, 1)
    grid = image_grid([Image.new("RGB", (4, 4), (255, 0, 0))] * 3, rows=3)
    assert grid.size == (4, 12)


@pytest.mark.parametrize("count, rows", [(0, None), (3, 0), (3, -1)])
def test_empty_grids_are_refused(count, rows):
    with pytest.raises(ValueError, match="at least one"):
        grid_shape(count, rows)


def test_cells_take_the_largest_image_and_do_not_crop():
    grid = image_grid([Image.new("RGB", (4, 2), (255, 0, 0)), Image.new("RGB", (2, 6), (0, 0, 255))])
    assert grid.size == (8, 6)
    assert grid.getpixel((4, 5)) == (0, 0, 255) and grid.getpixel((1, 5)) == (255, 255, 255)


def test_other_prefixes_are_numbered_apart(tmp_path):
    (tmp_path / "grid-0005.png").write_bytes(b"")
    (tmp_path / "xyz_grid-0001.png").write_bytes(b"")
    assert next_grid_path(tmp_path, "xyz_grid").name == "xyz_grid-0002.png"
    assert next_grid_path(tmp_path).name == "grid-0006.png"
