"""Input files the CLI tests hand to `mixkit img2img` / `outpaint`: seeded noise pictures (every pixel differs, so a
kept or changed pixel is visible) and rectangular masks, written as the user's files would be."""

from pathlib import Path

import numpy as np
from PIL import Image


def write_noise_picture(path: Path, seed: int, width: int, height: int) -> Path:
    """Save a width x height RGB picture of uniform noise (numpy default_rng(seed), 0-255) to `path`."""
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)).save(path)
    return path


def write_box_mask(path: Path, size: tuple[int, int], box: tuple[int, int, int, int]) -> Path:
    """Save a `size` (width, height) "L" mask to `path`: white (repainted) inside `box`, black elsewhere."""
    mask = Image.new("L", size, 0)
    mask.paste(255, box)
    mask.save(path)
    return path
