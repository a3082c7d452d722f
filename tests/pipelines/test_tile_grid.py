"""Tile positions and joining as A1111's split_grid / combine_grid (pipelines/tile_grid.py), hand-computed."""

import numpy as np
import pytest
from PIL import Image

from pipelines.tile_grid import check_tiling, combine_grid, split_grid, tile_starts


@pytest.mark.parametrize("length, tile, overlap, starts", [
    (1000, 512, 64, [0, 244, 488]),  # ceil(936 / 448) = 3 tiles, step (1000 - 512) / 2 = 244, last flush
    (700, 512, 64, [0, 188]),  # ceil(636 / 448) = 2, the second flush with the bottom
    (1500, 512, 64, [0, 329, 658, 988]),  # step 988 / 3 = 329.33: int() truncates, the last is flush
    (1024, 512, 0, [0, 512]),  # no overlap: side by side
    (512, 512, 64, [0]),  # one tile the size of the picture
    (96, 64, 32, [0, 32]),
])
def test_tile_starts_match_a1111_positions(length, tile, overlap, starts):
    assert tile_starts(length, tile, overlap) == starts


def test_split_crops_each_tile_at_its_position():
    pixels = np.random.default_rng(0).integers(0, 256, (700, 1000, 3), dtype=np.uint8)
    grid = split_grid(Image.fromarray(pixels), 512, 512, 64)
    assert [row.y for row in grid.rows] == [0, 188]
    assert [[x for x, _, _ in row.tiles] for row in grid.rows] == [[0, 244, 488]] * 2
    assert grid.columns == 3 and len(grid.images()) == 6
    x, _, tile = grid.rows[1].tiles[2]
    assert np.array_equal(np.asarray(tile), pixels[188:700, 488:1000])


@pytest.mark.parametrize("size, tile, overlap", [((1000, 700), (512, 512), 64), ((96, 80), (64, 48), 16),
                                                 ((128, 128), (64, 64), 0), ((64, 64), (64, 64), 8)])
def test_combine_of_an_unchanged_split_is_the_image_exactly(size, tile, overlap):
    pixels = np.random.default_rng(1).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    image = Image.fromarray(pixels)
    assert np.array_equal(np.asarray(combine_grid(split_grid(image, *tile, overlap))), pixels)


def test_seams_blend_linearly_over_the_overlap_and_paste_exactly_elsewhere():
    grid = split_grid(Image.new("RGB", (96, 96)), 64, 64, 32)  # tiles at x, y in (0, 32)
    colours = [(0, 0, 0), (255, 255, 255), (0, 0, 0), (255, 255, 255)]  # rows alike: black left, white right
    joined = np.asarray(combine_grid(grid.with_images([Image.new("RGB", (64, 64), c) for c in colours])))
    ramp = [i * 255 // 32 for i in range(32)]  # A1111's mask floor(i * 255 / overlap); PIL's blend gives it back
    assert joined[50, :32, 0].tolist() == [0] * 32
    assert joined[50, 32:64, 0].tolist() == ramp
    assert joined[50, 64:, 0].tolist() == [255] * 32
    assert (joined[:, :, 0] == joined[0:1, :, 0]).all()  # rows alike: the vertical blend of equal rows is exact


def test_vertical_seam_blends_top_to_bottom():
    grid = split_grid(Image.new("RGB", (64, 96)), 64, 64, 32)
    joined = np.asarray(combine_grid(grid.with_images([Image.new("RGB", (64, 64), (200, 0, 0)),
                                                       Image.new("RGB", (64, 64), (0, 0, 0))])))
    # the lower tile fades in over rows 32..63: 200 * (255 - m) / 255 with PIL's rounding
    column = joined[:, 10, 0].tolist()
    assert column[:32] == [200] * 32 and column[64:] == [0] * 32
    assert column[32] == 200 and column[63] < column[40] < 200


@pytest.mark.parametrize("size, tile, overlap, message", [
    ((128, 128), (64, 64), 64, "less than the tile size"),
    ((128, 128), (64, 64), -1, "at least 0"),
    ((48, 128), (64, 64), 8, "smaller than one tile"),
])
def test_bad_tilings_are_refused(size, tile, overlap, message):
    with pytest.raises(ValueError, match=message):
        check_tiling(*size, *tile, overlap)


def test_with_images_needs_one_image_per_tile():
    grid = split_grid(Image.new("RGB", (96, 64)), 64, 64, 32)
    with pytest.raises(ValueError, match="got 1 tile images for a grid of 2"):
        grid.with_images([Image.new("RGB", (64, 64))])
