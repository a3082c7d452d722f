"""Outpainting: extend the canvas on any side and paint the new area ("Poor man's outpainting").

The picture is placed on a larger canvas and the call runs as an inpainting pass of `ImageToImage`
with the chosen masked content (fill / original / latent noise / latent nothing), laid out as A1111's
`scripts/poor_mans_outpainting.py` lays it out: the repainted area reaches `2 * mask_blur` pixels into
the old picture on each extended side and is blurred with sigma `2 * mask_blur`, while the latent mask
(what is re-imposed at every step, and what "fill" fills) reaches only `mask_blur // 2` pixels in. The
generated border therefore eats into the old picture and blends into it instead of stopping at a hard
seam; the inpaint paste-back keeps the old pixels bit-identical outside the blurred mask.
"""

from __future__ import annotations

from typing import Any

from pipelines.generation import GenerationResult
from pipelines.image_prep import normalize_init_image

MAX_EXTENSION = 2048  # pixels per side; the resulting size is further bounded by the pipeline's limits
MAX_MASK_BLUR = 64  # A1111's Poor man's outpainting slider; the inpaint pass blurs with twice it (img2img takes 128)


OUTPAINT_DIRECTIONS = ("left", "right", "up", "down")  # A1111's "Outpainting direction" checkboxes


def outpaint_sides(width: int, height: int, pixels: Any, directions: Any, multiple: int) -> dict[str, int]:
    """Pixels to add per side (left, right, top, bottom) for A1111's "Pixels to expand" and "Outpainting direction".

    As A1111's Poor man's outpainting, each extended axis grows to the next multiple of the size step and the rounding
    is shared between its two sides in proportion (the left/top share rounded down). Unlike A1111, which rounds every
    axis up to 64 and leaves a black band of never-repainted canvas on an axis it does not extend, an axis that is not
    extended keeps its size and must already be a multiple of `multiple`.
    """
    if isinstance(pixels, bool) or not isinstance(pixels, int) or not 1 <= pixels <= MAX_EXTENSION:
        raise ValueError(f"pixels must be an integer number of pixels in [1, {MAX_EXTENSION}], got {pixels!r}.")
    if isinstance(directions, str) or not directions or not set(directions) <= set(OUTPAINT_DIRECTIONS):
        raise ValueError(f"directions must be a non-empty list among {', '.join(OUTPAINT_DIRECTIONS)}, got "
                         f"{directions!r}.")
    sides = {}
    for size, (first, second), (first_name, second_name), axis in (
            (width, ("left", "right"), ("left", "right"), "width"), (height, ("up", "down"), ("top", "bottom"), "height")):
        before, after = pixels * (first in directions), pixels * (second in directions)
        if not before and not after:
            if size % multiple:
                raise ValueError(f"The image's {axis} {size} is not a multiple of {multiple} and outpainting does not "
                                 f"extend it; add '{first}' or '{second}' to the directions, or resize the image first.")
            sides.update({first_name: 0, second_name: 0})
            continue
        target = -(-(size + before + after) // multiple) * multiple
        before = before * (target - size) // (before + after) if before else 0
        sides.update({first_name: before, second_name: target - size - before if after else 0})
    return sides


def check_outpaint_inputs(image, left: Any, right: Any, top: Any, bottom: Any, multiple: int,
                          mask_blur: Any = 4) -> tuple[int, int]:
    """Validate the extension and mask blur, and return the new canvas size (width, height)."""
    from PIL import Image

    if not isinstance(image, Image.Image):
        raise TypeError(f"image must be a PIL image, got {type(image).__name__}.")
    if image.width < 1 or image.height < 1:
        raise ValueError(f"image is {image.width}x{image.height} pixels; give an image with pixels to extend.")
    for name, value in (("left", left), ("right", right), ("top", top), ("bottom", bottom)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_EXTENSION:
            raise ValueError(f"{name} must be an integer number of pixels in [0, {MAX_EXTENSION}], got {value!r}.")
    if isinstance(mask_blur, bool) or not isinstance(mask_blur, int) or not 0 <= mask_blur <= MAX_MASK_BLUR:
        raise ValueError(f"mask_blur must be an integer in [0, {MAX_MASK_BLUR}] for outpainting (the mask is blurred "
                         f"with twice it, as A1111's Poor man's outpainting does), got {mask_blur!r}.")
    if left + right + top + bottom == 0:
        raise ValueError("Nothing to outpaint: left, right, top and bottom are all 0; extend at least one side.")
    width, height = image.width + left + right, image.height + top + bottom
    for name, value in (("width", width), ("height", height)):
        if value % multiple:
            raise ValueError(
                f"The outpainted {name} {value} (image plus extension) must be a multiple of {multiple}; "
                f"extend by {multiple - value % multiple} more pixel(s) on that axis."
            )
    return width, height


def outpaint_canvas(image, left: int, right: int, top: int, bottom: int, mask_blur: int = 4):
    """(canvas, mask, latent mask): the image on a black canvas of the new size, and two masks white over the new
    area, their black (keep) rectangle inset on each extended side as A1111's Poor man's outpainting draws it:
    by `2 * mask_blur` pixels for the mask, by `mask_blur // 2` for the latent mask (unblurred, it is what the
    sampler re-imposes and what "fill" fills).

    `image` is expected as `normalize_init_image` returns it (RGB); `outpaint` passes it so.
    """
    from PIL import Image

    width, height = image.width + left + right, image.height + top + bottom
    canvas = Image.new("RGB", (width, height))
    canvas.paste(image.convert("RGB"), (left, top))
    return canvas, keep_mask(canvas.size, left, right, top, bottom, 2 * mask_blur), \
        keep_mask(canvas.size, left, right, top, bottom, mask_blur // 2)


def keep_mask(size: tuple[int, int], left: int, right: int, top: int, bottom: int, inset: int):
    """A white mask with the old picture's rectangle black, pulled in by `inset` on each side that was extended.

    The far corner is inclusive, as Pillow's `ImageDraw.rectangle` (which A1111 uses) draws it, except where that
    pixel would lie in the new area: at an inset of 0 (mask blur 0, or the latent mask at blur 1) A1111 keeps one
    column or row of the black canvas at the right or bottom seam, a black line in its result. A picture too small
    for the insets keeps no rectangle and is repainted whole.
    """
    from PIL import Image, ImageDraw

    width, height = size
    x0, y0 = left + (inset if left else 0), top + (inset if top else 0)
    x1 = width - right - max(inset, 1) if right else width
    y1 = height - bottom - max(inset, 1) if bottom else height
    mask = Image.new("L", size, 255)
    if x0 <= x1 and y0 <= y1:
        ImageDraw.Draw(mask).rectangle((x0, y0, x1, y1), fill=0)
    return mask


def outpaint(pipe, image, left: int = 0, right: int = 0, top: int = 0, bottom: int = 0, *,
             inpainting_fill: str = "fill", mask_blur: int = 4, **img2img_params: Any) -> GenerationResult:
    """Extend `image` by the given pixels per side with an `ImageToImage` pipeline.

    The result has size (width + left + right, height + top + bottom), which must be a multiple
    of the model's size step (8 for SD). Masked content and mask blur default to the WebUI
    script's "fill" and 4. As in that script, the mask is blurred with sigma `2 * mask_blur` and the infotext
    records that doubled value as "Mask blur" (A1111 sets `p.mask_blur = mask_blur * 2`). Other keyword arguments
    are `Img2ImgParams` fields (prompt, steps, seed, denoising_strength, controlnets for a ControlNet pipeline,
    ...); width, height, init_images and the masks are set here. The infotext records Denoising strength, Mask blur
    and Masked content like the WebUI's script, so "send to img2img" restores them.
    """
    for reserved in ("width", "height", "init_images", "mask", "latent_mask", "inpaint_full_res",
                     "mask_blur_x", "mask_blur_y"):
        if reserved in img2img_params:
            raise TypeError(f"outpaint() sets {reserved} itself; remove it from the arguments.")
    from PIL import Image

    # Read as img2img reads init images (upright, transparency on white, not on the canvas's black), and sized after
    # that: an EXIF rotation swaps width and height. Anything else is refused by check_outpaint_inputs.
    original = normalize_init_image(image) if isinstance(image, Image.Image) and image.width and image.height else image
    width, height = check_outpaint_inputs(original, left, right, top, bottom, pipe.model.vae_scale_factor,
                                          mask_blur)
    canvas, mask, keep_latents = outpaint_canvas(original, left, right, top, bottom, mask_blur)
    # No paste of the original afterwards: the inpaint paste-back already keeps every pixel outside the blurred
    # mask, and pasting over the blend would bring back the hard seam A1111's insets avoid.
    return pipe(init_images=[canvas], mask=mask, latent_mask=keep_latents, width=width, height=height,
                inpainting_fill=inpainting_fill, mask_blur=2 * mask_blur, **img2img_params)
