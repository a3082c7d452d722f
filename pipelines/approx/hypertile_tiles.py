"""HyperTile's tiling math: which tile counts a self-attention may split its grid into, and the exact rearrangement.

HyperTile (github.com/tfernd/HyperTile; A1111 1.6+ extensions-builtin/hypertile) runs self-attention separately
inside tiles of the token grid: attention's cost is quadratic in the tokens it sees, so splitting an H x W grid into
n tiles divides that cost by about n. The rules follow A1111's:

- the tile size in pixels is the largest power of two dividing both sides of the image, capped by the "max tile
  size" option; a tile is at least 128 px (16 latent cells) whatever the option says;
- a level `depth` steps below the first attention level needs tiles 2**depth times that size (in its own cells), so
  with the defaults only the largest levels of large images are tiled;
- each side is split into `length // d` tiles, d a divisor of `length` that is at least the minimum tile; of those,
  the `swap_size` largest counts are candidates and one is drawn at random per attention call (the "swap"), so
  tile seams move from call to call instead of staying where they would show.

Only the rearrangement lives here: a pure permutation of tokens, exactly undone by `merge_*`.
"""

from __future__ import annotations

import math
import random

import torch

MIN_TILE_PIXELS = 128  # A1111: max(128, tile_size); smaller tiles cost more in overhead than they save
LATENT_FACTOR = 8  # pixels per latent cell (A1111 divides the pixel tile size by 8)


def largest_tile_size(width: int, height: int) -> int:
    """The largest power of two dividing both `width` and `height` (pixels)."""
    common = math.gcd(width, height)
    return common & -common  # the lowest set bit of the gcd


def tile_size(width: int, height: int, max_tile: int) -> int:
    """The tile size in pixels for an image of `width` x `height`: the largest power of two dividing both sides,
    capped at `max_tile` (A1111's "max tile size"), never below 128 px."""
    return max(MIN_TILE_PIXELS, min(largest_tile_size(width, height), max_tile))


def min_tile_cells(width: int, height: int, max_tile: int, depth: int) -> int:
    """The smallest tile side, in cells of an attention level `depth` steps below the first one."""
    return tile_size(width, height, max_tile) // LATENT_FACTOR * 2 ** depth


def tile_count_options(length: int, min_tile: int, swap_size: int) -> list[int]:
    """The tile counts a side of `length` cells may be split into, most tiles first: `length // d` for the
    `swap_size` smallest divisors d of `length` with d >= `min_tile` (a side shorter than `min_tile` stays whole)."""
    smallest = min(min_tile, length)
    divisors = [d for d in range(smallest, length + 1) if length % d == 0]
    return [length // d for d in divisors[:swap_size]]


def choose_tile_count(length: int, min_tile: int, swap_size: int, rng: random.Random) -> int:
    """One of `tile_count_options`, drawn uniformly with `rng` (which is advanced even when there is one option,
    as A1111's is, so the draws of later layers do not depend on whether this one had a choice)."""
    options = tile_count_options(length, min_tile, swap_size)
    return options[rng.randint(0, len(options) - 1)]


def split_tokens(tokens: torch.Tensor, height: int, width: int, rows: int, cols: int) -> torch.Tensor:
    """[B, H*W, C] tokens (row-major grid) -> [B*rows*cols, (H/rows)*(W/cols), C]: one batch entry per tile."""
    batch, _, channels = tokens.shape
    tile_h, tile_w = height // rows, width // cols
    grid = tokens.reshape(batch, rows, tile_h, cols, tile_w, channels)
    return grid.permute(0, 1, 3, 2, 4, 5).reshape(batch * rows * cols, tile_h * tile_w, channels).contiguous()


def merge_tokens(tiles: torch.Tensor, height: int, width: int, rows: int, cols: int) -> torch.Tensor:
    """The inverse of `split_tokens`."""
    channels = tiles.shape[-1]
    tile_h, tile_w = height // rows, width // cols
    batch = tiles.shape[0] // (rows * cols)
    grid = tiles.reshape(batch, rows, cols, tile_h, tile_w, channels)
    return grid.permute(0, 1, 3, 2, 4, 5).reshape(batch, height * width, channels).contiguous()


def split_maps(maps: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """[B, C, H, W] feature maps -> [B*rows*cols, C, H/rows, W/cols]: one batch entry per tile."""
    batch, channels, height, width = maps.shape
    tile_h, tile_w = height // rows, width // cols
    grid = maps.reshape(batch, channels, rows, tile_h, cols, tile_w)
    return grid.permute(0, 2, 4, 1, 3, 5).reshape(batch * rows * cols, channels, tile_h, tile_w).contiguous()


def merge_maps(tiles: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """The inverse of `split_maps`."""
    count, channels, tile_h, tile_w = tiles.shape
    batch = count // (rows * cols)
    grid = tiles.reshape(batch, rows, cols, channels, tile_h, tile_w)
    return grid.permute(0, 3, 1, 4, 2, 5).reshape(batch, channels, rows * tile_h, cols * tile_w).contiguous()
