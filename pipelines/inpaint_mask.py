"""Mask handling for inpainting, following the WebUI (pure functions on PIL images).

White = repaint. The blurred mask decides both what is regenerated and how the result is
pasted back over the original, so unmasked pixels come out bit-identical to the input.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

MASKED_CONTENT = ("original", "fill", "latent noise", "latent nothing")


@dataclass(frozen=True)
class CropRegion:
    """The 'only masked' crop: a box of the original image, processed at the full output size."""

    left: int
    top: int
    right: int
    bottom: int

    @property
    def size(self) -> tuple[int, int]:
        return self.right - self.left, self.bottom - self.top


def check_masked_content(value: str) -> str:
    folded = value.strip().lower() if isinstance(value, str) else value
    if folded not in MASKED_CONTENT:
        raise ValueError(f"Unknown masked content {value!r}; valid ones: {', '.join(MASKED_CONTENT)}.")
    return folded


def prepare_mask(mask, image_size: tuple[int, int], *, invert: bool = False):
    """Greyscale mask at the image's size; a mask of another size is resized with a warning when
    its aspect ratio matches (a scaled copy), and refused otherwise (it would not line up)."""
    from PIL import Image, ImageOps

    mask = mask.convert("L") if mask.mode != "L" else mask
    if mask.size != image_size:
        mask_ratio, image_ratio = mask.size[0] / mask.size[1], image_size[0] / image_size[1]
        if abs(mask_ratio / image_ratio - 1) > 0.01:
            raise ValueError(
                f"The mask is {mask.size[0]}x{mask.size[1]} but the image is {image_size[0]}x{image_size[1]}: "
                "their aspect ratios differ, so the mask cannot be aligned; give a mask of the image's size."
            )
        warnings.warn(f"Mask resized from {mask.size[0]}x{mask.size[1]} to the image's {image_size[0]}x{image_size[1]}.",
                      stacklevel=3)
        mask = mask.resize(image_size, Image.Resampling.LANCZOS)
    return ImageOps.invert(mask) if invert else mask


def blur_mask(mask, radius: int):
    from PIL import ImageFilter

    return mask.filter(ImageFilter.GaussianBlur(radius)) if radius > 0 else mask


def mask_bbox(mask):
    """Bounding box of the non-zero mask pixels, or None for an all-black mask."""
    return mask.getbbox()


def expand_crop_region(bbox, padding: int, target_w: int, target_h: int, image_w: int, image_h: int) -> CropRegion:
    """Pad the mask's box, then grow it to the output aspect ratio while staying inside the image."""
    left, top, right, bottom = bbox
    left, top = max(0, left - padding), max(0, top - padding)
    right, bottom = min(image_w, right + padding), min(image_h, bottom + padding)
    want = target_w / target_h
    width, height = right - left, bottom - top
    if width / height < want:  # too narrow: widen
        new_width = min(image_w, round(height * want))
        left = max(0, min(left - (new_width - width) // 2, image_w - new_width))
        right = left + new_width
    else:  # too flat: heighten
        new_height = min(image_h, round(width / want))
        top = max(0, min(top - (new_height - height) // 2, image_h - new_height))
        bottom = top + new_height
    return CropRegion(left, top, right, bottom)


def fill_masked_area(image, mask):
    """'fill' masked content: paint the masked area with ever-finer blurs of its surroundings."""
    from PIL import Image, ImageFilter

    result = image.convert("RGB")
    hard_mask = mask.point(lambda v: 255 if v > 0 else 0)
    for radius in (256, 64, 16, 4, 1):
        blurred = result.filter(ImageFilter.GaussianBlur(radius))
        result = Image.composite(blurred, result, hard_mask)
    return result


def latent_mask(mask, latent_size: tuple[int, int]):
    """[1, 1, h, w] float mask at latent resolution (1 = repaint)."""
    import numpy as np
    import torch
    from PIL import Image

    small = mask.resize(latent_size, Image.Resampling.BILINEAR)
    array = np.asarray(small, dtype=np.float32) / 255.0
    return torch.from_numpy(np.round(array))[None, None]


def paste_back(generated, original, overlay_mask):
    """Composite the generated image over the original: where the (blurred) mask is 0, the
    original pixels are kept bit for bit."""
    from PIL import Image

    return Image.composite(generated.convert("RGB"), original.convert("RGB"), overlay_mask)
