"""Inpainting's paste-back and working images follow A1111's `StableDiffusionProcessingImg2Img.init` and
`apply_overlay` / `uncrop` (modules/processing.py):

- "whole picture": the overlay is the blurred mask doubled and clipped (`np.clip(mask * 2, 0, 255)`), so what the
  mask repaints at half strength or more comes back fully generated;
- "only masked": the overlay is the blurred mask itself (not doubled); the crop (the blurred mask's box) goes in with
  `resize_image(2, ...)` ("resize and fill") and comes back with `resize_image(1, ...)` ("crop and resize") at the
  crop's size;
- `masking.fill` runs for every masked content but "original" (`if self.inpainting_fill != 1`).

Strength 0 with exact steps (A1111's img2img_fix_steps: a 0-step schedule, nothing sampled) makes the generated
image a VAE round trip of the working image, so each expected result below is computed exactly from the working image
A1111 would build.
"""

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter, ImageOps

import pipelines.img2img as img2img_module
from pipelines.image_prep import resize_image, to_model_pixels
from pipelines.img2img import ImageToImage
from pipelines.inpaint_mask import blur_mask, expand_crop_region, fill_masked_area, paste_back
from pipelines.vae_decode import decode_latents, encode_images

SMALL = dict(steps=4, seed=1, prompt="a red circle", sampler="Euler")


@pytest.fixture(scope="module")
def i2i(sd1_pipe):
    return ImageToImage.from_pipeline(sd1_pipe)


def noise_image(size, seed=0):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def box_mask(size, box, level=255):
    mask = Image.new("L", size, 0)
    ImageDraw.Draw(mask).rectangle(box, fill=level)
    return mask


def px(image):
    return np.asarray(image).astype(np.int16)


def a1111_apply_overlay(generated, original, overlay_mask):
    """A1111's overlay, restated: the original made transparent where the mask repaints (premultiplied RGBa, alpha
    255 - mask), alpha-composited over the generated image."""
    overlay = Image.new("RGBa", original.size)
    overlay.paste(original.convert("RGBA").convert("RGBa"), mask=ImageOps.invert(overlay_mask))
    out = generated.convert("RGBA")
    out.alpha_composite(overlay.convert("RGBA"))
    return out.convert("RGB")


def round_trip(pipe, image):
    return decode_latents(pipe.model.vae, encode_images(pipe.model.vae, to_model_pixels([image])))[0]


def test_whole_picture_pastes_back_with_the_doubled_blurred_mask(i2i):
    image, mask = noise_image((64, 64), 1), box_mask((64, 64), (20, 16, 43, 47))
    result = i2i(init_images=[image], mask=mask, mask_blur=4, denoising_strength=0.0, exact_steps=True, width=64,
                 height=64, **SMALL)
    blurred = np.asarray(blur_mask(mask, 4)).astype(np.float32)
    doubled = Image.fromarray(np.clip(blurred * 2, 0, 255).astype(np.uint8))
    expected = a1111_apply_overlay(round_trip(i2i, image), image, doubled)
    assert np.array_equal(px(result.images[0]), px(expected))
    # at the mask's own edge the blurred mask is about half: A1111 takes the generated pixel there, fully
    assert 100 < blurred[32, 20] < 160 and np.asarray(doubled)[32, 20] == 255


def test_a_grey_mask_repaints_as_fully_as_a_white_one(i2i):
    # The report's repro: a level-128 mask used to blend half of the original back in; A1111 rounds the latent mask
    # (128 / 255 -> 1) and doubles the overlay (256 -> 255), so the two results are the same.
    image = Image.new("RGB", (64, 64))
    kwargs = dict(init_images=[image], mask_blur=0, denoising_strength=1.0, width=64, height=64, **SMALL)
    white = i2i(mask=Image.new("L", (64, 64), 255), **kwargs)
    grey = i2i(mask=Image.new("L", (64, 64), 128), **kwargs)
    assert np.array_equal(px(white.images[0]), px(grey.images[0]))
    assert px(grey.images[0]).mean() > 20  # generated, not the black original


def test_only_masked_fits_the_crop_with_resize_and_fill_and_pastes_with_the_plain_blurred_mask(i2i):
    # A portrait image, a tall mask and landscape output: the crop cannot reach 3:2 inside a 64-wide image.
    # A1111 keeps the crop's proportions (resize and fill in, crop and resize out); the old code stretched it.
    image, mask = noise_image((64, 96), 2), box_mask((64, 96), (24, 20, 39, 75))
    result = i2i(init_images=[image], mask=mask, mask_blur=2, inpaint_full_res=True, inpaint_full_res_padding=8,
                 denoising_strength=0.0, exact_steps=True, width=96, height=64, **SMALL)
    # A1111 crops to the *blurred* mask's box (test_inpaint_only_masked_crop.py checks the box itself)
    crop = expand_crop_region(blur_mask(mask, 2).getbbox(), 8, 96, 64, 64, 96)
    box = (crop.left, crop.top, crop.right, crop.bottom)
    assert crop.size[0] / crop.size[1] < 1  # the case of the report: the crop is taller than wide
    work = resize_image(image.crop(box), 96, 64, "resize and fill")
    placed = image.copy()
    placed.paste(resize_image(round_trip(i2i, work), *crop.size, "crop and resize"), box[:2])
    expected = a1111_apply_overlay(placed, image, blur_mask(mask, 2))  # not doubled in "only masked"
    assert result.images[0].size == (64, 96)
    assert np.array_equal(px(result.images[0]), px(expected))


@pytest.mark.parametrize("fill, runs", [("original", False), ("fill", True), ("latent noise", True),
                                        ("latent nothing", True)])
def test_fill_runs_for_every_masked_content_but_original(i2i, monkeypatch, fill, runs):
    seen = []

    def spy(image, mask):
        seen.append(np.asarray(mask).copy())
        return fill_masked_area(image, mask)

    monkeypatch.setattr(img2img_module, "fill_masked_area", spy)
    mask = box_mask((64, 64), (16, 16, 47, 47))
    i2i(init_images=[noise_image((64, 64), 3)], mask=mask, mask_blur=4, inpainting_fill=fill, width=64, height=64,
        **{**SMALL, "steps": 2})
    assert bool(seen) == runs
    if runs:  # filled under A1111's latent mask: the blurred mask at the working size
        assert np.array_equal(seen[0], np.asarray(blur_mask(mask, 4)))


def a1111_fill(image, mask):
    """A1111's `masking.fill`, restated: the image with the masked area transparent (alpha 255 - mask), blurred at
    radii 256, 64, 16 (twice), 4 (four times), 2 (twice) and 0, each alpha-composited onto a transparent canvas."""
    holed = Image.new("RGBa", image.size)
    holed.paste(image.convert("RGBA").convert("RGBa"), mask=ImageOps.invert(mask))
    canvas = Image.new("RGBA", image.size)
    for radius in (256, 64, 16, 16, 4, 4, 4, 4, 2, 2, 0):
        canvas.alpha_composite(holed.filter(ImageFilter.GaussianBlur(radius)).convert("RGBA"))
    return canvas.convert("RGB")


@pytest.mark.parametrize("blur", [0, 4])
def test_fill_is_a1111s_masking_fill(blur):
    image = Image.new("RGB", (64, 64), (255, 255, 255))
    ImageDraw.Draw(image).rectangle((0, 0, 31, 63), fill=(0, 0, 0))
    ImageDraw.Draw(image).rectangle((20, 20, 43, 43), fill=(255, 0, 0))
    mask = blur_mask(box_mask((64, 64), (20, 20, 43, 43)), blur)
    assert np.array_equal(px(fill_masked_area(image, mask)), px(a1111_fill(image, mask)))


def test_paste_back_is_a1111s_overlay_to_the_level():
    generated, original = noise_image((48, 40), 4), noise_image((48, 40), 5)
    mask = Image.fromarray(np.random.default_rng(6).integers(0, 256, (40, 48), dtype=np.uint8))
    out = px(paste_back(generated, original, mask))
    assert np.array_equal(out, px(a1111_apply_overlay(generated, original, mask)))
    levels = np.asarray(mask)
    assert np.array_equal(out[levels == 0], px(original)[levels == 0])
    assert np.array_equal(out[levels == 255], px(generated)[levels == 255])
