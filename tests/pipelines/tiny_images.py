"""Pictures and masks the pipeline tests feed in: seeded noise (every pixel differs, so a changed or kept pixel is
visible) and rectangular masks, built the same way in every file so a seed names the same picture everywhere."""

import numpy as np
from PIL import Image


def noise_picture(seed: int, size: int = 64) -> Image.Image:
    """A size x size RGB picture of uniform noise from numpy's default_rng(seed)."""
    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (size, size, 3), dtype=np.uint8))


def box_mask(box: tuple[int, int, int, int], size: int = 64) -> Image.Image:
    """A size x size "L" mask, white (255, repainted) inside `box` (left, top, right, bottom), black elsewhere."""
    mask = Image.new("L", (size, size), 0)
    mask.paste(255, box)
    return mask


def square_mask() -> Image.Image:
    """The inpainting tests' usual mask: a 32x24 box off the 64x64 picture's centre, on the 8-pixel latent grid."""
    return box_mask((16, 16, 48, 40))
