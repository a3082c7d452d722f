"""The "only masked" crop is taken where A1111 takes it: from the *blurred* mask.

A1111 1.10, `StableDiffusionProcessingImg2Img.init` (modules/processing.py): the mask is blurred first
(`mask_blur_x`, then `mask_blur_y`), then `crop_region = masking.get_crop_region_v2(mask, padding)` runs on that
blurred mask, then `masking.expand_crop_region(crop_region, width, height, mask.width, mask.height)`; a blurred mask
with no pixel left (`get_crop_region_v2` returns None) drops "only masked" (`self.inpaint_full_res = False`) and no
"Inpaint area" is recorded. `a1111_crop_region` below restates those two masking functions (integer arithmetic
included: the missing length is `int(...)`, split `diff // 2` before and the rest after, shifted back inside the
image, clipped when longer than it).

Before, mixkit cropped to the unblurred mask's box: with padding 0 the outer half of the blur ramp lay outside the
crop, where the paste-back kept the original, so the blend stopped at the crop's edge (a seam).
"""

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageOps

from pipelines.image_prep import resize_image, to_model_pixels
from pipelines.img2img import ImageToImage
from pipelines.infotext import parse_infotext
from pipelines.inpaint_mask import CropRegion, blur_mask, only_masked_crop, prepare_mask
from pipelines.vae_decode import decode_latents, encode_images

SMALL = dict(steps=4, seed=1, prompt="a red circle", sampler="Euler")


@pytest.fixture(scope="module")
def i2i(sd1_pipe):
    return ImageToImage.from_pipeline(sd1_pipe)


def a1111_crop_region(blurred, pad, width, height):
    """A1111's `get_crop_region_v2` then `expand_crop_region`, restated; None for a blank mask."""
    box = blurred.getbbox()
    if box is None:
        return None
    x1, y1, x2, y2 = box
    if pad:
        x1, y1, x2, y2 = max(x1 - pad, 0), max(y1 - pad, 0), min(x2 + pad, blurred.width), min(y2 + pad, blurred.height)
    processing_ratio = width / height
    if (x2 - x1) / (y2 - y1) > processing_ratio:
        y1, y2 = a1111_expand_axis(y1, y2, int((x2 - x1) / processing_ratio - (y2 - y1)), blurred.height)
    else:
        x1, x2 = a1111_expand_axis(x1, x2, int((y2 - y1) * processing_ratio - (x2 - x1)), blurred.width)
    return x1, y1, x2, y2


def a1111_expand_axis(low, high, diff, size):
    low -= diff // 2
    high += diff - diff // 2
    if high >= size:
        low, high = low - (high - size), size
    if low < 0:
        low, high = 0, high - low
    if high >= size:
        high = size
    return low, high


def box_mask(size, box, level=255):
    mask = Image.new("L", size, 0)
    ImageDraw.Draw(mask).rectangle(box, fill=level)
    return mask


def noise_image(size, seed=0):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def px(image):
    return np.asarray(image).astype(np.int16)


def as_box(crop: CropRegion):
    return crop.left, crop.top, crop.right, crop.bottom


def test_the_reports_mask_crops_to_the_blur_ramps_box():
    # QA report #2: a 40 px square blurred by 4 reaches 10 px further on each side; A1111 crops to (90, 90, 150, 150).
    mask = prepare_mask(box_mask((256, 256), (100, 100, 139, 139)), (256, 256))
    blurred = blur_mask(mask, 4, 4)
    assert mask.getbbox() == (100, 100, 140, 140) and blurred.getbbox() == (90, 90, 150, 150)
    crop = only_masked_crop(blurred, 0, 512, 512)
    assert as_box(crop) == a1111_crop_region(blurred, 0, 512, 512) == (90, 90, 150, 150)
    assert as_box(only_masked_crop(blurred, 32, 512, 512)) == (58, 58, 182, 182)  # padded from the blurred box


def test_crop_boxes_match_a1111_over_random_masks_paddings_and_sizes():
    # Includes ratios whose missing length is fractional, where A1111 truncates (rounding gives a pixel more), and
    # crops pushed against the image's edges or longer than the image.
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(400):
        image_w, image_h = (int(v) for v in rng.integers(8, 160, 2))
        left, top = int(rng.integers(0, image_w)), int(rng.integers(0, image_h))
        right, bottom = int(rng.integers(left, image_w)), int(rng.integers(top, image_h))
        mask = box_mask((image_w, image_h), (left, top, right, bottom), level=int(rng.integers(1, 256)))
        blurred = blur_mask(mask, int(rng.integers(0, 9)), int(rng.integers(0, 9)))
        padding = int(rng.choice([0, 0, 3, 8, 32]))
        width, height = (int(v) for v in rng.choice([64, 72, 96, 120, 512, 768], 2))
        crop = only_masked_crop(blurred, padding, width, height)
        expected = a1111_crop_region(blurred, padding, width, height)
        assert (None if crop is None else as_box(crop)) == expected, (image_w, image_h, padding, width, height)
        checked += expected is not None
    assert checked > 300


def round_trip(pipe, image):
    return decode_latents(pipe.model.vae, encode_images(pipe.model.vae, to_model_pixels([image])))[0]


def a1111_apply_overlay(generated, original, overlay_mask):
    overlay = Image.new("RGBa", original.size)
    overlay.paste(original.convert("RGBA").convert("RGBa"), mask=ImageOps.invert(overlay_mask))
    out = generated.convert("RGBA")
    out.alpha_composite(overlay.convert("RGBA"))
    return out.convert("RGB")


def test_only_masked_with_no_padding_blends_the_whole_blur_ramp(i2i):
    # Strength 0 with exact steps (a 0-step schedule): the generated crop is the VAE round trip of A1111's working
    # image, so the result is exact.
    image, mask = noise_image((96, 80), 3), box_mask((96, 80), (40, 30, 55, 49))
    result = i2i(init_images=[image], mask=mask, mask_blur=4, inpaint_full_res=True, inpaint_full_res_padding=0,
                 denoising_strength=0.0, exact_steps=True, width=96, height=64, **SMALL)
    blurred = blur_mask(mask, 4)
    box = a1111_crop_region(blurred, 0, 96, 64)
    crop_size = (box[2] - box[0], box[3] - box[1])
    work = resize_image(image.crop(box), 96, 64, "resize and fill")
    placed = image.copy()
    placed.paste(resize_image(round_trip(i2i, work), *crop_size, "crop and resize"), box[:2])
    expected = a1111_apply_overlay(placed, image, blurred)
    assert np.array_equal(px(result.images[0]), px(expected))
    # The ramp just outside the unblurred box (x = 36..39 on row 40) is blended, not left as the original.
    ramp = np.asarray(blurred)[40, 36:40]
    assert ramp.min() > 0
    assert not np.array_equal(px(result.images[0])[40, 36:40], px(image)[40, 36:40])
    assert parse_infotext(result.infotexts[0])["Inpaint area"] == "Only masked"


def test_a_mask_blank_once_blurred_runs_plain_img2img_on_the_whole_picture_and_says_so(i2i):
    # A 3x3 patch at level 1 rounds to 0 under a blur of 4: A1111's get_crop_region_v2 finds no region, so it drops
    # the mask and "only masked" ('Unable to perform "Inpaint Only mask" because mask is blank, switch to img2img
    # mode.') and writes no "Inpaint area": the whole picture is repainted, the image plain img2img gives.
    image, faint = noise_image((64, 64), 4), box_mask((64, 64), (30, 30, 32, 32), level=1)
    assert blur_mask(faint, 4).getbbox() is None
    with pytest.warns(UserWarning, match="Inpaint Only mask.*mask is blank"):
        result = i2i(init_images=[image], mask=faint, mask_blur=4, inpaint_full_res=True, inpaint_full_res_padding=8,
                     width=64, height=64, **SMALL)
    params = parse_infotext(result.infotexts[0], defaults=False)
    assert "Inpaint area" not in params and "Masked area padding" not in params
    plain = i2i(init_images=[image], width=64, height=64, **SMALL)
    assert np.array_equal(px(result.images[0]), px(plain.images[0]))
    assert not np.array_equal(px(result.images[0]), px(image))
