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
    """The canonical (A1111) spelling of a masked-content choice: "Latent Noise" and " fill " are accepted, and the
    pipeline runs and records the canonical name, so what ran and what the infotext says cannot differ."""
    folded = value.strip().lower() if isinstance(value, str) else value
    if folded not in MASKED_CONTENT:
        raise ValueError(f"Unknown masked content {value!r}; valid ones: {', '.join(MASKED_CONTENT)}.")
    return folded


def check_mask_image(mask) -> None:
    """Refuse what no mask can be: not a PIL image, or without pixels (its aspect ratio would divide by zero)."""
    from PIL import Image

    if mask is None:
        return
    if not isinstance(mask, Image.Image):
        raise TypeError(f"mask must be a PIL image or None, got {type(mask).__name__}.")
    if mask.width < 1 or mask.height < 1:
        raise ValueError(f"mask is {mask.width}x{mask.height} pixels; give a mask of the init image's size "
                         "(white = repaint), or None for plain img2img.")


def binary_mask(mask):
    """A user's mask as 8-bit greyscale (white = repaint), read as A1111's `create_binary_mask` reads it.

    A mask with transparency that is not fully opaque carries its strokes in the alpha channel (A1111's
    canvas sends the strokes as opaque pixels on a transparent layer), so the alpha is thresholded
    (> 128 = repaint) and the colours are ignored. Any other mask is its grey levels, read like an
    init image (`mixkit.io.images.load_image`: upright, 16-bit scaled to 8-bit). A1111 looks at
    alpha only in RGBA masks; here LA and palette masks with transparency are read the same way, as
    their alpha means the same thing.
    """
    from PIL import ImageOps

    from mixkit.io.images import load_image

    upright = ImageOps.exif_transpose(mask)
    if _has_alpha(upright):
        alpha = upright.convert("RGBA").getchannel("A")
        if alpha.getextrema() != (255, 255):
            return alpha.point(lambda v: 255 if v > 128 else 0)
    return load_image(upright, max_pixels=max(1, upright.width * upright.height)).convert("L")


def _has_alpha(image) -> bool:
    return image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or (image.mode == "P" and "transparency" in image.info)


def repaint_mask(mask, *, invert: bool = False):
    """`binary_mask`, inverted for "inpaint not masked" (A1111 inverts before blurring and resizing)."""
    from PIL import ImageOps

    binary = binary_mask(mask)
    return ImageOps.invert(binary) if invert else binary


def is_blank(mask) -> bool:
    """True when a greyscale mask repaints nothing (every pixel 0)."""
    return mask.getextrema()[1] == 0


def prepare_mask(mask, image_size: tuple[int, int], *, invert: bool = False):
    """Greyscale mask at the image's size (see `repaint_mask`); a mask of another size is resized with a warning
    when its aspect ratio matches (a scaled copy), and refused otherwise (it would not line up)."""
    from PIL import Image

    mask = repaint_mask(mask, invert=invert)
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
    return mask


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


INPAINTING_UNET_CHANNELS = 9  # 4 noisy latent + 1 mask + 4 masked-image latent channels


def is_inpainting_unet(unet) -> bool:
    return unet.config.in_channels == INPAINTING_UNET_CHANNELS


def masked_model_pixels(pixels, mask):
    """The masked image an inpainting checkpoint is conditioned on: `pixels` ([B, 3, H, W] in the VAE's [-1, 1])
    with the repainted area (mask >= 128, A1111's rounding) set to 0, mid grey.

    0 is what these checkpoints were trained with (diffusers' `init_image * (mask < 0.5)`, A1111's
    `inpainting_image_conditioning`); black (-1) reads to the model as a black object to keep.
    """
    import numpy as np
    import torch

    keep = torch.from_numpy(np.asarray(mask.convert("L")) < 128)
    return pixels * keep.to(pixels.dtype)[None, None]


def full_mask_channels(model, count: int, latent_shape: tuple[int, int, int]):
    """The extra UNet input of an inpainting checkpoint when no mask is given (txt2img, img2img without mask,
    hires fix's second pass): a mask repainting everything and the VAE encoding of a fully masked image
    (0 everywhere in model space), [count, 5, h, w]. None for any other UNet, which takes no extra input.

    A1111 does the same (`txt2img_image_conditioning`; `img2img_image_conditioning` without a mask,
    whose full mask blanks out the init image at the default inpainting_mask_weight of 1), so such a
    checkpoint generates like a regular one instead of failing on its 9 input channels.
    """
    if not is_inpainting_unet(model.unet):
        return None
    import torch

    from pipelines.vae_decode import encode_images

    _, height, width = latent_shape
    factor = model.vae_scale_factor
    blank = encode_images(model.vae, torch.zeros(1, 3, height * factor, width * factor)).to(model.device)
    mask = torch.ones(1, 1, height, width, device=model.device, dtype=blank.dtype)
    return torch.cat([mask, blank], dim=1).expand(count, -1, -1, -1)
