"""Outpainting mk2: extend the canvas and paint the new area from noise matched to the picture (A1111's
scripts/outpainting_mk_2.py, "Outpainting mk2").

Where Poor man's outpainting (`pipelines.outpaint`) starts the border from a flat fill, mk2 starts it from noise with
the picture's spectrum and colours (`pipelines.matched_noise`) and redraws it with masked content "original", so the
sampler continues the picture's texture instead of inventing one. Laid out as A1111 lays it out: the fill and the
repainted area reach `mask_blur` pixels into the old picture on each extended side, the latent mask (what the
sampler re-imposes) `2 * mask_blur`, and the mask is blurred with sigma `4 * mask_blur` on the extended axes only
(A1111's per-axis `mask_blur_x` / `mask_blur_y`; an axis not extended gets no blur, so its edges stay sharp).

Unlike A1111, which rounds every axis up to 64 and runs one img2img pass per direction on crops of the request's
size, the canvas grows on the extended axes only (to the model's size step, as `pipelines.outpaint.outpaint_sides`
rounds it) and is filled and painted in one pass: one infotext, one seed, no seams between the passes.
"""

from __future__ import annotations

from typing import Any

from pipelines.generation import GenerationResult
from pipelines.image_prep import normalize_init_image
from pipelines.matched_noise import check_fill_settings, matched_noise_fill
from pipelines.outpaint import check_outpaint_inputs, keep_mask, outpaint_sides

MIN_PIXELS, MAX_PIXELS = 8, 256  # A1111's "Pixels to expand" slider for mk2 (Poor man's takes up to 2048)
# A1111's slider goes to 64, but its pass blurs with 4x it and mixkit's img2img blurs up to 128 (MAX_MASK_BLUR there)
MAX_MK2_MASK_BLUR = 32
BLUR_FACTOR = 4  # A1111 sets the pass's mask blur to 4x the script's
FILL_SEED = 0  # A1111 seeds the matched noise with 0 always: the result follows the generation seed only


def mk2_sides(width: int, height: int, pixels: Any, directions: Any, multiple: int) -> dict[str, int]:
    """Pixels to add per side for mk2's "Pixels to expand" (8-256, its slider) and directions, rounded as
    `outpaint_sides` rounds them (each extended axis up to the next multiple of `multiple`)."""
    if isinstance(pixels, bool) or not isinstance(pixels, int) or not MIN_PIXELS <= pixels <= MAX_PIXELS:
        raise ValueError(f"pixels must be an integer in [{MIN_PIXELS}, {MAX_PIXELS}] for Outpainting mk2 (A1111's "
                         f"slider; Poor man's outpainting takes more), got {pixels!r}.")
    return outpaint_sides(width, height, pixels, directions, multiple)


def check_mk2_settings(mask_blur: Any, falloff_exponent: Any, color_variation: Any) -> None:
    """ValueError naming the setting when the mask blur, fall-off exponent or colour variation is out of bounds."""
    if isinstance(mask_blur, bool) or not isinstance(mask_blur, int) or not 0 <= mask_blur <= MAX_MK2_MASK_BLUR:
        raise ValueError(f"mask_blur must be an integer in [0, {MAX_MK2_MASK_BLUR}] for Outpainting mk2 (the pass "
                         f"blurs with {BLUR_FACTOR}x it, as A1111 does, and img2img blurs up to "
                         f"{BLUR_FACTOR * MAX_MK2_MASK_BLUR}), got {mask_blur!r}.")
    check_fill_settings(falloff_exponent, color_variation)


def mk2_canvas(image, left: int, right: int, top: int, bottom: int, mask_blur: int, falloff_exponent: float,
               color_variation: float):
    """(filled canvas, mask, latent mask): `image` (RGB) on the larger canvas with the new area and a `mask_blur`
    band of the old picture replaced by matched noise; the mask white over that area, the latent mask reaching
    `2 * mask_blur` into the old picture."""
    from PIL import Image

    canvas = Image.new("RGB", (image.width + left + right, image.height + top + bottom))
    canvas.paste(image, (left, top))
    mask = keep_mask(canvas.size, left, right, top, bottom, mask_blur)
    filled = matched_noise_fill(canvas, mask, falloff_exponent=falloff_exponent, color_variation=color_variation,
                                seed=FILL_SEED)
    return filled, mask, keep_mask(canvas.size, left, right, top, bottom, 2 * mask_blur)


def outpaint_mk2(pipe, image, left: int = 0, right: int = 0, top: int = 0, bottom: int = 0, *, mask_blur: int = 8,
                 falloff_exponent: float = 1.0, color_variation: float = 0.05,
                 **img2img_params: Any) -> GenerationResult:
    """Extend `image` by the given pixels per side with an `ImageToImage` pipeline, A1111's Outpainting mk2 way.

    `mask_blur` (0-32, default 8 as A1111's), `falloff_exponent` (0-4, default 1; lower = finer detail in the fill)
    and `color_variation` (0-1, default 0.05; how much of the fill's noise keeps its own colour) are the script's
    controls. The size (image plus sides) must be a multiple of the model's size step. Other keyword arguments are
    `Img2ImgParams` fields (prompt, steps, seed, denoising_strength, ...; A1111 recommends 80-100 steps, Euler a and
    strength 0.8); the canvas, masks, size, blur and masked content ("original") are set here. The infotext records
    Denoising strength, Mask blur (4x the script's, when both axes are blurred alike) and Masked content, as A1111's.
    """
    for reserved in ("width", "height", "init_images", "mask", "latent_mask", "inpaint_full_res", "inpainting_fill",
                     "mask_blur_x", "mask_blur_y"):
        if reserved in img2img_params:
            raise TypeError(f"outpaint_mk2() sets {reserved} itself; remove it from the arguments.")
    from PIL import Image

    check_mk2_settings(mask_blur, falloff_exponent, color_variation)
    original = normalize_init_image(image) if isinstance(image, Image.Image) and image.width and image.height else image
    width, height = check_outpaint_inputs(original, left, right, top, bottom, pipe.model.vae_scale_factor)
    filled, mask, keep_latents = mk2_canvas(original.convert("RGB"), left, right, top, bottom, mask_blur,
                                            falloff_exponent, color_variation)
    blur_x = BLUR_FACTOR * mask_blur if left or right else 0
    blur_y = BLUR_FACTOR * mask_blur if top or bottom else 0
    return pipe(init_images=[filled], mask=mask, latent_mask=keep_latents, width=width, height=height,
                inpainting_fill="original", inpaint_full_res=False, mask_blur=max(blur_x, blur_y),
                mask_blur_x=blur_x, mask_blur_y=blur_y, **img2img_params)

