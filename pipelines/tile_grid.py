"""A picture cut into overlapping tiles and put back together, as A1111's `split_grid` / `combine_grid` do it.

SD upscale (pipelines.scripts.sd_upscale) runs img2img on every tile of an upscaled picture and joins the results.
The tile positions follow A1111 exactly, so a tile grid here covers the same pixels as there:

- columns = ceil((W - overlap) / (tile_w - overlap)), rows likewise; the spare room is spread evenly, so tile `i`
  starts at int(i * (W - tile_w) / (columns - 1)) (0 for a single column), and a tile that would reach the edge
  starts flush with it (W - tile_w). Neighbours therefore overlap by at least `overlap` pixels, often more.
- Joining: each row is built left to right, each tile after the first blending its first `overlap` columns over
  what is there with a linear ramp (mask value floor(i * 255 / overlap) for column i) and pasting the rest of
  itself over it; the rows are then joined top to bottom the same way with a vertical ramp. Where tiles do not
  overlap the tile's own pixels come back unchanged, and `combine_grid(split_grid(image))` is `image` exactly
  (PIL's mask blend of two equal pixels is that pixel).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class TileRow:
    """One row of tiles: its top edge, its height and its tiles as [x, width, image] (the image is replaced in
    place by the processed tile before joining)."""

    y: int
    height: int
    tiles: list = field(default_factory=list)


@dataclass
class TileGrid:
    """The tiles of a `width` x `height` picture, `tile_width` x `tile_height` each, `overlap` pixels blended."""

    rows: list
    tile_width: int
    tile_height: int
    width: int
    height: int
    overlap: int

    @property
    def columns(self) -> int:
        return len(self.rows[0].tiles) if self.rows else 0

    def images(self) -> list:
        """Every tile's image, row by row, left to right (the order SD upscale processes them in)."""
        return [tile[2] for row in self.rows for tile in row.tiles]

    def with_images(self, images: list) -> "TileGrid":
        """A copy of the grid whose tiles hold `images` (row by row), for joining processed tiles."""
        if len(images) != len(self.images()):
            raise ValueError(f"got {len(images)} tile images for a grid of {len(self.images())} tiles.")
        source = iter(images)
        rows = [TileRow(row.y, row.height, [[x, w, next(source)] for x, w, _ in row.tiles]) for row in self.rows]
        return TileGrid(rows, self.tile_width, self.tile_height, self.width, self.height, self.overlap)


def tile_starts(length: int, tile: int, overlap: int) -> list[int]:
    """Where the tiles along one side of `length` pixels start (A1111's split_grid positions)."""
    count = math.ceil((length - overlap) / (tile - overlap))
    step = (length - tile) / (count - 1) if count > 1 else 0
    return [length - tile if int(index * step) + tile >= length else int(index * step) for index in range(count)]


def check_tiling(width: int, height: int, tile_width: int, tile_height: int, overlap: int) -> None:
    """ValueError unless a `width` x `height` picture can be tiled: overlap in [0, tile side), picture at least one
    tile on each side (A1111 would crop outside the picture and join black borders in)."""
    for name, value in (("tile width", tile_width), ("tile height", tile_height), ("overlap", overlap)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an integer number of pixels, got {value!r}.")
    if tile_width < 1 or tile_height < 1:
        raise ValueError(f"The tile size must be positive, got {tile_width}x{tile_height}.")
    if not 0 <= overlap < min(tile_width, tile_height):
        raise ValueError(f"Tile overlap {overlap} must be at least 0 and less than the tile size "
                         f"{tile_width}x{tile_height}; lower the overlap or raise width/height.")
    if width < tile_width or height < tile_height:
        raise ValueError(f"The picture ({width}x{height}) is smaller than one tile ({tile_width}x{tile_height}); "
                         "lower width/height (the tile size) or upscale by more.")


def split_grid(image, tile_width: int, tile_height: int, overlap: int) -> TileGrid:
    """`image` (PIL) cut into tiles at A1111's positions (see the module docstring)."""
    check_tiling(image.width, image.height, tile_width, tile_height, overlap)
    rows = []
    for y in tile_starts(image.height, tile_height, overlap):
        row = TileRow(y, tile_height)
        for x in tile_starts(image.width, tile_width, overlap):
            row.tiles.append([x, tile_width, image.crop((x, y, x + tile_width, y + tile_height))])
        rows.append(row)
    return TileGrid(rows, tile_width, tile_height, image.width, image.height, overlap)


def ramp_mask(width: int, height: int, overlap: int, *, horizontal: bool):
    """The "L" mask that fades a tile in over its first `overlap` columns (or rows): value floor(i * 255 / overlap)
    at column (row) i, as A1111's uint8 cast of i * 255 / overlap."""
    import numpy as np
    from PIL import Image

    ramp = (np.arange(overlap, dtype=np.float32) * 255 / overlap).astype(np.uint8)
    values = np.broadcast_to(ramp[None, :], (height, overlap)) if horizontal else \
        np.broadcast_to(ramp[:, None], (overlap, width))
    return Image.fromarray(np.ascontiguousarray(values), "L")


def combine_grid(grid: TileGrid):
    """The tiles joined into one RGB picture of the grid's size, blended over `overlap` pixels at each seam."""
    from PIL import Image

    overlap = grid.overlap
    column_mask = ramp_mask(grid.tile_width, grid.tile_height, overlap, horizontal=True) if overlap else None
    row_mask = ramp_mask(grid.width, grid.tile_height, overlap, horizontal=False) if overlap else None
    combined = Image.new("RGB", (grid.width, grid.height))
    for row in grid.rows:
        line = Image.new("RGB", (grid.width, row.height))
        for x, width, tile in row.tiles:
            tile = tile.convert("RGB")
            if x == 0 or not overlap:
                line.paste(tile, (x, 0))
                continue
            line.paste(tile.crop((0, 0, overlap, row.height)), (x, 0), mask=column_mask)
            line.paste(tile.crop((overlap, 0, width, row.height)), (x + overlap, 0))
        if row.y == 0 or not overlap:
            combined.paste(line, (0, row.y))
            continue
        combined.paste(line.crop((0, 0, grid.width, overlap)), (0, row.y), mask=row_mask)
        combined.paste(line.crop((0, overlap, grid.width, row.height)), (0, row.y + overlap))
    return combined
