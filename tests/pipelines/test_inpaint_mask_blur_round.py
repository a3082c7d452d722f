"""Per-axis mask blur and `mask_round`, as A1111's `StableDiffusionProcessingImg2Img` (modules/processing.py):

- `mask_blur_x` / `mask_blur_y`: `cv2.GaussianBlur(mask, (k, 1), x)` then `(1, k)` with y, k = 2 * int(2.5 * s + 0.5)
  + 1, each skipped at 0; the infotext's "Mask blur" is A1111's `mask_blur` property: x when x == y, else None
  (dropped);
- `mask_round=False`: `create_binary_mask(round=False)` keeps the alpha strokes' levels, and the latent mask
  (`latmask`, the mask resized with Pillow's default filter, / 255) is not `np.around`-ed.

OpenCV (a test dependency) is the oracle for the blur; mixkit itself blurs without it.
"""

import cv2
import numpy as np
import pytest
from PIL import Image, ImageDraw

from pipelines.image_prep import resize_image
from pipelines.img2img import Img2ImgParams, ImageToImage
from pipelines.infotext import parse_infotext
from pipelines.inpaint_mask import binary_mask, blur_kernel_size, blur_mask, latent_mask

SMALL = dict(width=64, height=64, steps=2, seed=3, prompt="a red circle", sampler="Euler")


@pytest.fixture(scope="module")
def i2i(sd1_pipe):
    return ImageToImage.from_pipeline(sd1_pipe)


def noise_image(seed=1, size=(64, 64)):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def box_mask(size=(64, 64), box=(24, 24, 39, 39)):
    mask = Image.new("L", size, 0)
    ImageDraw.Draw(mask).rectangle(box, fill=255)
    return mask


def opencv_blur(mask, blur_x, blur_y):
    """A1111's two passes, with OpenCV."""
    pixels = np.asarray(mask)
    if blur_x > 0:
        pixels = cv2.GaussianBlur(pixels, (blur_kernel_size(blur_x), 1), blur_x)
    if blur_y > 0:
        pixels = cv2.GaussianBlur(pixels, (1, blur_kernel_size(blur_y)), blur_y)
    return pixels


def test_kernel_size_is_a1111s():
    assert [blur_kernel_size(s) for s in (1, 2, 4, 8, 64)] == [7, 11, 21, 41, 321]


@pytest.mark.parametrize("blur_x, blur_y", [(4, 4), (0, 8), (8, 0), (1, 3), (64, 2), (13, 13)])
def test_blur_matches_opencv_bit_for_bit(blur_x, blur_y):
    rng = np.random.default_rng(blur_x * 100 + blur_y)
    masks = [box_mask(), box_mask((37, 90), (5, 30, 20, 70)),
             Image.fromarray(rng.integers(0, 256, (23, 41), dtype=np.uint8)),
             Image.fromarray((rng.random((50, 3)) > 0.5).astype(np.uint8) * 255),  # narrower than the kernel
             Image.fromarray(rng.integers(0, 256, (1, 40), dtype=np.uint8))]  # one row: the border is the pixel
    for mask in masks:
        assert np.array_equal(np.asarray(blur_mask(mask, blur_x, blur_y)), opencv_blur(mask, blur_x, blur_y))


def test_vertical_only_blur_leaves_the_sides_sharp(i2i):
    # Strength 0 with exact steps returns the VAE round trip pasted back with the blurred mask: where the mask's blur
    # is 0 the input comes back exactly. With x = 0 the columns beside the box stay untouched; with y = 8 the rows
    # above it do not.
    image = noise_image()
    mask = box_mask()
    out = np.asarray(i2i(init_images=[image], mask=mask, mask_blur_x=0, mask_blur_y=8, denoising_strength=0.0,
                         exact_steps=True, **SMALL).images[0]).astype(int)
    src = np.asarray(image).astype(int)
    assert np.array_equal(out[24:40, 16:24], src[24:40, 16:24])  # left of the box: no horizontal blur
    assert not np.array_equal(out[16:24, 24:40], src[16:24, 24:40])  # above the box: blurred in
    untouched = opencv_blur(mask, 0, 8) == 0
    assert np.array_equal(out[untouched], src[untouched])


def test_none_uses_mask_blur_and_the_infotext_is_a1111s(i2i):
    mask = box_mask()

    def recorded(**kwargs):
        text = i2i(init_images=[noise_image()], mask=mask, **{**SMALL, **kwargs}).infotexts[0]
        return parse_infotext(text, defaults=False).get("Mask blur")

    assert recorded(mask_blur=4) == "4"
    assert recorded(mask_blur=4, mask_blur_x=3, mask_blur_y=3) == "3"
    assert recorded(mask_blur=4, mask_blur_y=4) == "4"  # x is None: mask_blur, equal to y
    assert recorded(mask_blur=4, mask_blur_x=0, mask_blur_y=8) is None  # A1111's mask_blur is None when x != y
    assert recorded(mask_blur=4, mask_blur_x=0, mask_blur_y=0) is None  # no blur: not recorded, as A1111


@pytest.mark.parametrize("bad, error, message", [
    (dict(mask_blur_x=-1), ValueError, "mask_blur_x must be an integer in \\[0, 128\\], or None"),
    (dict(mask_blur_y=129), ValueError, "mask_blur_y"),
    (dict(mask_blur_x=2.5), ValueError, "mask_blur_x"),
    (dict(mask_blur_y=True), ValueError, "mask_blur_y"),
    (dict(mask_round="no"), TypeError, "mask_round must be True or False"),
])
def test_bad_blur_or_round_is_refused(i2i, bad, error, message):
    with pytest.raises(error, match=message):
        i2i(init_images=[noise_image()], mask=box_mask(), **{**SMALL, **bad})


def soft_alpha_mask():
    """A transparent mask whose stroke fades: alpha 0..255 across the width (A1111's canvas with a soft brush)."""
    alpha = np.tile(np.linspace(0, 255, 64).astype(np.uint8), (64, 1))
    rgba = np.zeros((64, 64, 4), dtype=np.uint8)
    rgba[..., 3] = alpha
    return Image.fromarray(rgba, mode="RGBA"), alpha


def test_round_false_keeps_soft_alpha_strokes():
    mask, alpha = soft_alpha_mask()
    assert np.array_equal(np.asarray(binary_mask(mask, round=False)), alpha)
    assert np.array_equal(np.asarray(binary_mask(mask)), np.where(alpha > 128, 255, 0))


def a1111_latmask(mask, latent_w, latent_h, rounded):
    """A1111's latmask, restated: the mask as RGB resized without naming a filter (Pillow's bicubic), channel 0
    divided by 255."""
    small = np.asarray(mask.convert("RGB").resize((latent_w, latent_h)), dtype=np.float32)[..., 0] / 255
    return np.around(small) if rounded else small


@pytest.mark.parametrize("rounded", [True, False])
def test_latent_mask_is_a1111s_latmask(i2i, rounded):
    mask, _ = soft_alpha_mask()
    params = Img2ImgParams(init_images=[noise_image()], mask=mask, mask_blur=4, mask_round=rounded,
                           resize_mode="crop and resize", **{**SMALL, "width": 48})
    i2i.check_inputs(params)
    inputs = i2i._prepare(params)
    working = resize_image(blur_mask(binary_mask(mask, round=rounded), 4), 48, 64, "crop and resize")
    expected = a1111_latmask(working, 6, 8, rounded)
    assert np.array_equal(inputs.latent_mask[0, 0].numpy(), expected)
    assert np.array_equal(latent_mask(working, (6, 8), round=rounded)[0, 0].numpy(), expected)
    levels = len(np.unique(expected))
    assert (levels == 2) if rounded else (levels > 2)  # 0 and 1, or soft as asked



def test_round_false_fades_the_inpainting_unets_masked_image():
    # A1111's inpainting_image_conditioning: torch.round(mask) when mask_round, else the soft mask, then
    # lerp(image, image * (1 - mask), 1) = image * (1 - mask).
    import torch

    from pipelines.inpaint_mask import masked_model_pixels

    pixels = torch.rand(1, 3, 4, 4) * 2 - 1
    levels = np.array([[0, 64, 127, 128], [191, 255, 32, 200], [0, 0, 0, 0], [255, 255, 255, 255]], dtype=np.uint8)
    mask = Image.fromarray(levels)
    soft = torch.from_numpy(1 - levels.astype(np.float32) / 255)
    assert torch.equal(masked_model_pixels(pixels, mask, round=False), pixels * soft)
    assert torch.equal(masked_model_pixels(pixels, mask), pixels * torch.from_numpy(levels < 128).float())
