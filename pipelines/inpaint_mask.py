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


def binary_mask(mask, *, round: bool = True):
    """A user's mask as 8-bit greyscale (white = repaint), read as A1111's `create_binary_mask` reads it.

    A mask with transparency that is not fully opaque carries its strokes in the alpha channel (A1111's
    canvas sends the strokes as opaque pixels on a transparent layer), so the alpha is thresholded
    (> 128 = repaint), or kept as it is with `round=False` (A1111's `mask_round`: soft strokes), and the
    colours are ignored. Any other mask is its grey levels, read like an
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
            return alpha.point(lambda v: 255 if v > 128 else 0) if round else alpha
    return load_image(upright, max_pixels=max(1, upright.width * upright.height)).convert("L")


def _has_alpha(image) -> bool:
    return image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or (image.mode == "P" and "transparency" in image.info)


def repaint_mask(mask, *, invert: bool = False, round: bool = True):
    """`binary_mask`, inverted for "inpaint not masked" (A1111 inverts before blurring and resizing)."""
    from PIL import ImageOps

    binary = binary_mask(mask, round=round)
    return ImageOps.invert(binary) if invert else binary


def is_blank(mask) -> bool:
    """True when a greyscale mask repaints nothing (every pixel 0)."""
    return mask.getextrema()[1] == 0


def prepare_mask(mask, image_size: tuple[int, int], *, invert: bool = False, round: bool = True):
    """Greyscale mask at the image's size (see `repaint_mask`); a mask of another size is resized with a warning
    when its aspect ratio matches (a scaled copy), and refused otherwise (it would not line up)."""
    from PIL import Image

    mask = repaint_mask(mask, invert=invert, round=round)
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


def blur_mask(mask, blur_x: int, blur_y: int | None = None):
    """The mask blurred as A1111 blurs it: a horizontal Gaussian of sigma `blur_x`, then a vertical one of sigma
    `blur_y` (default: `blur_x`), each skipped at 0, so "Mask blur x: 0, y: 8" softens only the top and bottom edges.

    A1111 runs OpenCV's `GaussianBlur` with a (k, 1) and then a (1, k) kernel, k = `blur_kernel_size(sigma)`;
    `_gaussian_blur_axis` gives OpenCV's 8-bit result exactly without importing OpenCV.
    """
    import numpy as np
    from PIL import Image

    blur_y = blur_x if blur_y is None else blur_y
    if blur_x <= 0 and blur_y <= 0:
        return mask
    pixels = np.asarray(mask.convert("L"))
    if blur_x > 0:
        pixels = _gaussian_blur_axis(pixels, blur_x, axis=1)
    if blur_y > 0:
        pixels = _gaussian_blur_axis(pixels, blur_y, axis=0)
    return Image.fromarray(pixels, mode="L")


def blur_kernel_size(sigma: int) -> int:
    """A1111's kernel length for a mask blur of `sigma`: 2 * int(2.5 * sigma + 0.5) + 1, about 2.5 sigma each side."""
    return 2 * int(2.5 * sigma + 0.5) + 1


def _gaussian_blur_axis(pixels, sigma: int, axis: int):
    """uint8 `pixels` blurred along `axis` as OpenCV's `GaussianBlur` blurs 8-bit images: the kernel in 8-bit fixed
    point (`_fixed_point_gaussian`), the integer sum rounded half up, mirrored borders without repeating the edge
    (OpenCV's default BORDER_REFLECT_101 is scipy's "mirror", repeated for a kernel longer than the image)."""
    import numpy as np
    from scipy.ndimage import correlate1d

    kernel = _fixed_point_gaussian(sigma, blur_kernel_size(sigma))
    total = correlate1d(pixels.astype(np.int64), kernel, axis=axis, mode="mirror")  # integers, exact in float64
    return ((total + 128) >> 8).clip(0, 255).astype(np.uint8)


def _fixed_point_gaussian(sigma: int, size: int):
    """OpenCV's bit-exact 8-bit Gaussian kernel: exp(-x^2 / 2 sigma^2) normalised, each outer tap rounded to 1/256
    with the rounding error carried to the next tap, and the centre tap whatever makes the sum exactly 256."""
    import numpy as np

    centre = size // 2
    distance = np.arange(centre, 0, -1, dtype=np.float64)  # outermost tap first, as OpenCV walks the kernel
    outer = np.exp(-(distance ** 2) / (2.0 * sigma * sigma))
    outer /= 2.0 * outer.sum() + 1.0
    kernel = np.zeros(size, dtype=np.int64)
    carried = 0.0
    for index, value in enumerate(outer):
        scaled = value * 256 + carried
        tap = int(np.rint(scaled))
        carried = scaled - tap
        kernel[index] = kernel[size - 1 - index] = tap
    kernel[centre] = 256 - 2 * int(kernel[:centre].sum())
    return kernel


def whole_picture_overlay(mask):
    """The paste-back mask of a "whole picture" inpaint: the blurred mask doubled and clipped, as A1111's
    `mask_for_overlay` (`np.clip(mask * 2, 0, 255)`). Everything the mask repaints at half strength or more comes
    back fully generated, as the rounded latent mask generated it; only the outer half of the blur blends.
    ("Only masked" pastes with the blurred mask itself, as A1111 does there.)"""
    import numpy as np
    from PIL import Image

    doubled = np.clip(np.asarray(mask.convert("L"), dtype=np.float32) * 2, 0, 255).astype(np.uint8)
    return Image.fromarray(doubled, mode="L")


def mask_bbox(mask):
    """Bounding box of the non-zero mask pixels, or None for an all-black mask."""
    return mask.getbbox()


def only_masked_crop(blurred_mask, padding: int, target_w: int, target_h: int) -> CropRegion | None:
    """The "only masked" region of the image, as A1111's `StableDiffusionProcessingImg2Img.init` finds it: the box
    of the *blurred* mask (`get_crop_region_v2` runs after the blur), padded, then grown to the output's aspect
    ratio (`expand_crop_region`). None when the blurred mask is blank: there is no region (A1111 then runs on the
    whole picture).

    Taking the box after the blur keeps the whole blur ramp inside the crop, so the paste-back (with that same
    blurred mask) fades out inside the region instead of stopping at its edge.
    """
    bbox = mask_bbox(blurred_mask)
    if bbox is None:
        return None
    return expand_crop_region(bbox, padding, target_w, target_h, *blurred_mask.size)


def expand_crop_region(bbox, padding: int, target_w: int, target_h: int, image_w: int, image_h: int) -> CropRegion:
    """Pad the mask's box, then grow it to the output aspect ratio while staying inside the image.

    A1111's arithmetic (`masking.get_crop_region_v2` padding, then `masking.expand_crop_region`): the missing
    length is truncated (`int(...)`, not rounded), split around the box with the odd pixel at the end, shifted
    back inside the image, and clipped to the image when it is longer than the image.
    """
    left, top, right, bottom = bbox
    left, top = max(0, left - padding), max(0, top - padding)
    right, bottom = min(image_w, right + padding), min(image_h, bottom + padding)
    want = target_w / target_h
    width, height = right - left, bottom - top
    if width / height > want:  # flatter than the output: heighten
        top, bottom = _grown_span(top, bottom, int(width / want - height), image_h)
    else:  # narrower (or the same): widen
        left, right = _grown_span(left, right, int(height * want - width), image_w)
    return CropRegion(left, top, right, bottom)


def _grown_span(start: int, end: int, grow: int, limit: int) -> tuple[int, int]:
    """One side of the crop grown by `grow` pixels (half before, the rest after), kept inside [0, limit]."""
    start, end = start - grow // 2, end + grow - grow // 2
    if end > limit:
        start, end = start - (end - limit), limit
    if start < 0:
        start, end = 0, end - start
    return start, min(end, limit)


def fill_masked_area(image, mask):
    """'fill' pre-processing (A1111's `masking.fill`, run for every masked content but "original"): the masked area
    painted with ever-finer blurs of its surroundings.

    The image is made transparent where the mask repaints (alpha = 255 - mask, so a soft mask edge is half
    transparent), and blurs of it at radii 256, 64, 16, 16, 4 x 4, 2, 2 and 0 are alpha-composited in that order
    onto a transparent canvas: wide blurs spread the surrounding colours over the hole, finer ones bring back
    detail near its edge, and the last (unblurred) layer restores the unmasked pixels.
    """
    from PIL import Image, ImageFilter, ImageOps

    cut_out = Image.new("RGBa", image.size)
    cut_out.paste(image.convert("RGBA").convert("RGBa"), mask=ImageOps.invert(mask.convert("L")))
    result = Image.new("RGBA", image.size)
    for radius, repeats in ((256, 1), (64, 1), (16, 2), (4, 4), (2, 2), (0, 1)):
        blurred = cut_out.filter(ImageFilter.GaussianBlur(radius)).convert("RGBA")
        for _ in range(repeats):
            result.alpha_composite(blurred)
    return result.convert("RGB")


def latent_mask(mask, latent_size: tuple[int, int], *, round: bool = True):
    """[1, 1, h, w] float mask at latent resolution (1 = repaint), as A1111's `latmask`: the (blurred) mask resized
    with Pillow's default bicubic filter, then rounded to 0 or 1, or kept soft with `round=False` (A1111's
    `mask_round`), which blends the generated and the original latents in proportion at every step."""
    import numpy as np
    import torch
    from PIL import Image

    small = mask.convert("L").resize(latent_size, Image.Resampling.BICUBIC)
    array = np.asarray(small, dtype=np.float32) / 255.0
    return torch.from_numpy(np.round(array) if round else array)[None, None]


def conditioning_mask(mask, latent_size: tuple[int, int], *, round: bool = True):
    """[1, 1, h, w] mask channel of a 9-channel inpainting UNet, as A1111's `inpainting_image_conditioning` builds it:
    the full-resolution (blurred) mask, rounded unless `round=False`, then shrunk to latent size by torch's default
    nearest interpolation (diffusers' `prepare_mask_latents` too). The blending mask (`latent_mask`) is a bicubic
    resize instead, so the two can differ by a cell along the mask's edge."""
    import numpy as np
    import torch

    full = torch.from_numpy(np.asarray(mask.convert("L"), dtype=np.float32) / 255.0)[None, None]
    if round:
        full = torch.round(full)
    width, height = latent_size
    return torch.nn.functional.interpolate(full, size=(height, width))


def paste_back(generated, original, overlay_mask):
    """The generated image with the original laid over it where `overlay_mask` keeps it, as A1111's `apply_overlay`:
    the original with alpha 255 - mask (premultiplied, as A1111 builds its overlay) alpha-composited over the result.
    Where the mask is 0 the original pixels come back bit for bit; where it is 255, the generated ones."""
    from PIL import Image, ImageOps

    overlay = Image.new("RGBa", original.size)
    overlay.paste(original.convert("RGBA").convert("RGBa"), mask=ImageOps.invert(overlay_mask.convert("L")))
    result = generated.convert("RGBA")
    result.alpha_composite(overlay.convert("RGBA"))
    return result.convert("RGB")


INPAINTING_UNET_CHANNELS = 9  # 4 noisy latent + 1 mask + 4 masked-image latent channels


def is_inpainting_unet(unet) -> bool:
    return unet.config.in_channels == INPAINTING_UNET_CHANNELS


def masked_model_pixels(pixels, mask, *, round: bool = True, weight: float = 1.0):
    """The masked image an inpainting checkpoint is conditioned on: `pixels` ([B, 3, H, W] in the VAE's [-1, 1])
    with the repainted area (mask >= 128, A1111's rounding) set to 0, mid grey; with `round=False` (A1111's
    `mask_round`) scaled by 1 - mask / 255 instead, so a soft edge fades to grey. `mask` None: the whole image is
    the repainted area (A1111's img2img without a mask).

    0 is what these checkpoints were trained with (diffusers' `init_image * (mask < 0.5)`, A1111's
    `inpainting_image_conditioning`); black (-1) reads to the model as a black object to keep. `weight` is A1111's
    inpainting_mask_weight: its lerp from the image to the masked image, pixels * (1 - weight * mask).
    """
    import numpy as np
    import torch

    if mask is None:
        return pixels * (1.0 - weight)
    levels = np.asarray(mask.convert("L"))
    repaint = torch.from_numpy((levels >= 128).astype(np.float32) if round else levels.astype(np.float32) / 255)
    if weight == 1.0:  # bit for bit what it was before the weight existed
        return pixels * (1 - repaint).to(pixels.dtype)[None, None]
    return pixels * (1 - weight * repaint).to(pixels.dtype)[None, None]


def weighted_conditioning_channels(vae, pixels, weight: float):
    """An inpainting UNet's extra input for a whole-image repaint at inpainting_mask_weight `weight` < 1: a mask of
    ones and the VAE encoding of `pixels` ([B, 3, H, W] in [-1, 1]) scaled by 1 - weight, [B, 5, h, w]. A1111's
    `img2img_image_conditioning` without a mask (img2img, hires fix's second pass); at weight 1 it is
    `full_mask_channels`' grey."""
    import torch

    from pipelines.vae_decode import encode_images

    latents = encode_images(vae, masked_model_pixels(pixels, None, weight=weight))
    ones = torch.ones(latents.shape[0], 1, *latents.shape[2:], dtype=latents.dtype, device=latents.device)
    return torch.cat([ones, latents], dim=1)


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
