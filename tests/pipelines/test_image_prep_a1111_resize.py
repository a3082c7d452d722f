"""`resize_image`'s "crop and resize" and "resize and fill" are A1111's `images.resize_image` modes 1 and 2, pixel
for pixel.

The oracle below restates A1111's algorithm from its description (modules/images.py `resize_image`, no img2img
upscaler set): the side that does not match the box is scaled with integer flooring (`src * height // src_height`),
the scaled image is pasted on a black canvas at `size // 2 - scaled // 2`, and for "resize and fill" each band is
the image's edge stretched by resizing a zero-height (or zero-width) box on that edge with Pillow's default filter,
both bands `size // 2 - scaled // 2` wide. Lanczos for the main resize.
"""

import numpy as np
import pytest
from PIL import Image

from pipelines.image_prep import resize_image


def a1111_resize(image, width, height, fill):
    """A1111's mode 1 (fill=False) or 2 (fill=True), restated."""
    box_ratio, source_ratio = width / height, image.width / image.height
    width_exact = box_ratio < source_ratio if fill else box_ratio > source_ratio
    if width_exact:
        new_w, new_h = width, image.height * width // image.width
    else:
        new_w, new_h = image.width * height // image.height, height
    scaled = image.resize((new_w, new_h), Image.Resampling.LANCZOS)
    out = Image.new(image.mode, (width, height))
    out.paste(scaled, (width // 2 - new_w // 2, height // 2 - new_h // 2))
    if fill and box_ratio < source_ratio:
        band = height // 2 - new_h // 2
        if band > 0:
            out.paste(scaled.resize((width, band), box=(0, 0, width, 0)), (0, 0))
            out.paste(scaled.resize((width, band), box=(0, new_h, width, new_h)), (0, band + new_h))
    elif fill and box_ratio > source_ratio:
        band = width // 2 - new_w // 2
        if band > 0:
            out.paste(scaled.resize((band, height), box=(0, 0, 0, height)), (0, 0))
            out.paste(scaled.resize((band, height), box=(new_w, 0, new_w, height)), (band + new_w, 0))
    return out


def noise(size, mode="RGB", seed=0):
    rng = np.random.default_rng(seed)
    shape = (size[1], size[0], 3) if mode == "RGB" else (size[1], size[0])
    return Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode=mode)


# The report's cases: 640x480 -> 512 used to round 682.67 up to 683 (every pixel off), 333x500 -> 512 fill rounded
# 340.99 to 341, and every fill band came from a 1-pixel crop resized with Lanczos instead of A1111's stretched edge.
SIZES = [((100, 75), (64, 64)), ((75, 100), (64, 64)), ((101, 67), (64, 48)), ((640, 480), (512, 512)),
         ((333, 500), (512, 512)), ((512, 300), (512, 512)), ((300, 512), (512, 512)), ((64, 48), (96, 64)),
         ((7, 200), (64, 64)), ((50, 50), (64, 32)), ((100, 75), (64, 48)), ((63, 40), (63, 41))]


@pytest.mark.parametrize("source, target", SIZES)
@pytest.mark.parametrize("mode, fill", [("crop and resize", False), ("resize and fill", True)])
def test_matches_a1111_bit_for_bit(source, target, mode, fill):
    for image_mode in ("RGB", "L"):
        image = noise(source, image_mode, seed=sum(source))
        expected = np.asarray(a1111_resize(image, *target, fill))
        actual = resize_image(image, *target, mode)
        assert actual.size == target and actual.mode == image_mode
        assert np.array_equal(np.asarray(actual), expected), (source, target, mode, image_mode)


def test_the_scaled_side_is_floored_as_a1111():
    # 640x480 covering 512x512: A1111 scales to 682x512 (640 * 512 // 480), not 683, and crops 85 columns on the left.
    image = Image.new("RGB", (640, 480))
    image.paste((255, 0, 0), (0, 0, 320, 480))
    out = np.asarray(resize_image(image, 512, 512, "crop and resize")).astype(int)
    scaled = np.asarray(image.resize((682, 512), Image.Resampling.LANCZOS)).astype(int)
    assert np.array_equal(out, scaled[:, 341 - 256:341 - 256 + 512])


def test_an_odd_leftover_leaves_a1111s_black_line_on_the_far_side():
    # 63 wide, image scaled to 40: bands of 63 // 2 - 40 // 2 = 11 on each side, so column 62 stays black as in A1111.
    image = Image.new("RGB", (40, 40), (200, 100, 50))
    out = np.asarray(resize_image(image, 63, 40, "resize and fill"))
    assert (out[:, 62] == 0).all() and (out[:, :62] > 0).all()
