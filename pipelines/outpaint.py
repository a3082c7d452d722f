"""Outpainting: extend the canvas on any side and paint the new area ("Poor man's outpainting").

The picture is placed on a larger canvas, the new border is masked, and the call runs as an
inpainting pass of `ImageToImage` with the chosen masked content (fill / original / latent noise /
latent nothing) and mask blur. Afterwards the original pixels are pasted back unchanged, so the
mask blur only softens the new side of the seam and the original area is bit-identical.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pipelines.generation import GenerationResult
from pipelines.image_prep import normalize_init_image

MAX_EXTENSION = 2048  # pixels per side; the resulting size is further bounded by the pipeline's limits


def check_outpaint_inputs(image, left: Any, right: Any, top: Any, bottom: Any, multiple: int) -> tuple[int, int]:
    """Validate the extension and return the new canvas size (width, height)."""
    from PIL import Image

    if not isinstance(image, Image.Image):
        raise TypeError(f"image must be a PIL image, got {type(image).__name__}.")
    if image.width < 1 or image.height < 1:
        raise ValueError(f"image is {image.width}x{image.height} pixels; give an image with pixels to extend.")
    for name, value in (("left", left), ("right", right), ("top", top), ("bottom", bottom)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_EXTENSION:
            raise ValueError(f"{name} must be an integer number of pixels in [0, {MAX_EXTENSION}], got {value!r}.")
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


def outpaint_canvas(image, left: int, right: int, top: int, bottom: int):
    """(canvas, mask): the image on a black canvas of the new size, and a mask white over the new area.

    `image` is expected as `normalize_init_image` returns it (RGB); `outpaint` passes it so.
    """
    from PIL import Image

    width, height = image.width + left + right, image.height + top + bottom
    canvas = Image.new("RGB", (width, height))
    canvas.paste(image.convert("RGB"), (left, top))
    mask = Image.new("L", (width, height), 255)
    mask.paste(0, (left, top, left + image.width, top + image.height))
    return canvas, mask


def outpaint(pipe, image, left: int = 0, right: int = 0, top: int = 0, bottom: int = 0, *,
             inpainting_fill: str = "fill", mask_blur: int = 4, **img2img_params: Any) -> GenerationResult:
    """Extend `image` by the given pixels per side with an `ImageToImage` pipeline.

    The result has size (width + left + right, height + top + bottom), which must be a multiple
    of the model's size step (8 for SD). Masked content and mask blur default to the WebUI
    script's "fill" and 4. Other keyword arguments are `Img2ImgParams` fields (prompt, steps,
    seed, denoising_strength, controlnets for a ControlNet pipeline, ...); width, height,
    init_images and mask are set here. The infotext records Denoising strength, Mask blur and Masked content like the
    WebUI's script, so "send to img2img" restores them.
    """
    for reserved in ("width", "height", "init_images", "mask", "inpaint_full_res"):
        if reserved in img2img_params:
            raise TypeError(f"outpaint() sets {reserved} itself; remove it from the arguments.")
    from PIL import Image

    # Read as img2img reads init images (upright, transparency on white, not on the canvas's black), and sized after
    # that: an EXIF rotation swaps width and height. Anything else is refused by check_outpaint_inputs.
    original = normalize_init_image(image) if isinstance(image, Image.Image) and image.width and image.height else image
    width, height = check_outpaint_inputs(original, left, right, top, bottom, pipe.model.vae_scale_factor)
    canvas, mask = outpaint_canvas(original, left, right, top, bottom)
    result = pipe(init_images=[canvas], mask=mask, width=width, height=height, inpainting_fill=inpainting_fill,
                  mask_blur=mask_blur, **img2img_params)
    images = []
    for generated in result.images:
        generated = generated.copy()
        generated.paste(original, (left, top))
        images.append(generated)
    return replace(result, images=images)
