"""HyperTile's tiling math: A1111's tile-size rules exactly, and a rearrangement that is an exact permutation."""

import random

import pytest
import torch

from pipelines.approx.hypertile_tiles import (choose_tile_count, largest_tile_size, merge_maps, merge_tokens,
                                              min_tile_cells, split_maps, split_tokens, tile_count_options, tile_size)


@pytest.mark.parametrize("width, height, expected", [(512, 512, 512), (512, 768, 256), (1024, 1536, 512),
                                                     (520, 512, 8), (600, 800, 8), (64, 64, 64)])
def test_largest_tile_is_the_largest_power_of_two_dividing_both_sides(width, height, expected):
    assert largest_tile_size(width, height) == expected


@pytest.mark.parametrize("width, height, max_tile, expected", [
    (512, 512, 256, 256), (1024, 1024, 512, 512), (512, 768, 512, 256),
    (520, 512, 256, 128),  # largest power of two is 8: tiles are never below 128 px
    (512, 512, 0, 128), (512, 512, 100, 128),
])
def test_tile_size_is_capped_by_the_option_and_never_below_128_px(width, height, max_tile, expected):
    assert tile_size(width, height, max_tile) == expected


def test_deeper_levels_need_tiles_twice_as_large_per_level():
    assert [min_tile_cells(512, 512, 256, depth) for depth in range(4)] == [32, 64, 128, 256]
    assert min_tile_cells(1024, 1024, 128, 0) == 16


@pytest.mark.parametrize("length, min_tile, swap, expected", [
    (64, 32, 3, [2, 1]), (64, 16, 3, [4, 2, 1]), (64, 16, 1, [4]), (64, 16, 2, [4, 2]),
    (48, 16, 3, [3, 2, 1]), (48, 16, 64, [3, 2, 1]), (96, 16, 3, [6, 4, 3]),
    (8, 32, 3, [1]),  # a side shorter than the minimum tile stays whole
])
def test_tile_count_options_are_the_largest_counts_with_tiles_of_at_least_the_minimum(length, min_tile, swap,
                                                                                       expected):
    assert tile_count_options(length, min_tile, swap) == expected


def test_choice_draws_uniformly_with_the_rng_and_always_advances_it():
    rng, reference = random.Random(7), random.Random(7)
    picks = [choose_tile_count(64, 16, 3, rng) for _ in range(50)]
    assert picks == [[4, 2, 1][reference.randint(0, 2)] for _ in range(50)]
    assert set(picks) == {4, 2, 1}
    single, advanced = random.Random(3), random.Random(3)
    assert choose_tile_count(8, 32, 3, single) == 1
    advanced.randint(0, 0)
    assert single.getstate() == advanced.getstate()


@pytest.mark.parametrize("rows, cols", [(1, 1), (2, 1), (1, 3), (2, 3), (4, 6)])
def test_token_split_is_an_exact_permutation_into_spatial_tiles(rows, cols):
    height, width, channels = 8, 12, 5
    tokens = torch.arange(2 * height * width * channels, dtype=torch.float32).reshape(2, height * width, channels)
    tiles = split_tokens(tokens, height, width, rows, cols)
    tile_h, tile_w = height // rows, width // cols
    assert tiles.shape == (2 * rows * cols, tile_h * tile_w, channels)
    grid = tokens.reshape(2, height, width, channels)
    for b in range(2):
        for r in range(rows):
            for c in range(cols):
                crop = grid[b, r * tile_h:(r + 1) * tile_h, c * tile_w:(c + 1) * tile_w].reshape(-1, channels)
                assert torch.equal(tiles[(b * rows + r) * cols + c], crop)
    assert torch.equal(merge_tokens(tiles, height, width, rows, cols), tokens)


@pytest.mark.parametrize("rows, cols", [(1, 1), (2, 2), (4, 1), (2, 4)])
def test_feature_map_split_is_an_exact_permutation_into_spatial_tiles(rows, cols):
    maps = torch.randn(3, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    tiles = split_maps(maps, rows, cols)
    tile_h, tile_w = 8 // rows, 8 // cols
    assert tiles.is_contiguous() and tiles.shape == (3 * rows * cols, 4, tile_h, tile_w)
    for b in range(3):
        for r in range(rows):
            for c in range(cols):
                crop = maps[b, :, r * tile_h:(r + 1) * tile_h, c * tile_w:(c + 1) * tile_w]
                assert torch.equal(tiles[(b * rows + r) * cols + c], crop)
    assert torch.equal(merge_maps(tiles, rows, cols), maps)
