"""img2img and inpainting with ControlNets, on a tiny 9-channel inpainting model and a plain SD 1.x model."""

import numpy as np
import pytest
from PIL import Image, ImageFilter

from pipelines.controlnet import ControlNetImageToImage, ControlNetUnit

from .tiny_images import square_mask

SIZE = 64
SMALL = dict(prompt="a cat", seed=11, width=SIZE, height=SIZE, steps=4, sampler="Euler", denoising_strength=0.75)


def pixels(image):
    return np.asarray(image).astype(np.int16)


@pytest.fixture(scope="module")
def mask():
    return square_mask()


def test_nine_channel_unet_inpaints_with_unmasked_pixels_bit_identical(tiny_sd1_inpaint_dir, picture, mask, controlnet):
    pipe = ControlNetImageToImage.from_pretrained(tiny_sd1_inpaint_dir)
    assert pipe.model.unet.config.in_channels == 9
    channels = []
    handle = pipe.model.unet.register_forward_pre_hook(lambda module, args: channels.append(args[0].shape[1]))
    try:
        plain = pipe(init_images=[picture], mask=mask, mask_blur=2, **SMALL)
        controlled = pipe(init_images=[picture], mask=mask, mask_blur=2, controlnets=[ControlNetUnit(controlnet)], **SMALL)
    finally:
        handle.remove()
    assert set(channels) == {9}
    untouched = np.asarray(mask.filter(ImageFilter.GaussianBlur(2))) == 0
    for result in (plain, controlled):
        out = pixels(result.images[0])
        assert np.array_equal(out[untouched], pixels(picture)[untouched])
        assert np.abs(out[~untouched] - pixels(picture)[~untouched]).mean() > 1
    # the unit without image used the init image, and it changed the masked area
    assert not np.array_equal(pixels(plain.images[0]), pixels(controlled.images[0]))
    assert 'ControlNet 0: "Module: none' in controlled.infotexts[0] and "Mask blur: 2" in controlled.infotexts[0]


def test_img2img_guidance_fraction_counts_the_steps_actually_run(tiny_sd1_dir, picture, controlnet):
    """Strength 0.5 of 8 steps runs 5 steps; window [0, 0.5] covers steps 0, 1, 2 of those 5 (step/5 <= 0.5)."""
    pipe = ControlNetImageToImage.from_pretrained(tiny_sd1_dir)
    ran = []
    handle = controlnet.register_forward_pre_hook(lambda module, args: ran.append(float(args[1])))
    try:
        pipe(init_images=[picture], controlnets=[ControlNetUnit(controlnet, picture, guidance_end=0.5)],
             **{**SMALL, "steps": 8, "denoising_strength": 0.5})
    finally:
        handle.remove()
    assert len(ran) == 3
    assert ran == sorted(ran, reverse=True)


def test_only_masked_inpainting_crops_the_control_image_like_the_init_image(tiny_sd1_dir, picture, mask, controlnet):
    """A unit given the init picture itself and a unit without image (which uses the init image) see the same crop."""
    pipe = ControlNetImageToImage.from_pretrained(tiny_sd1_dir)
    options = dict(init_images=[picture], mask=mask, inpaint_full_res=True, inpaint_full_res_padding=4, **SMALL)
    implicit = pipe(controlnets=[ControlNetUnit(controlnet)], **options)
    explicit = pipe(controlnets=[ControlNetUnit(controlnet, picture)], **options)
    assert np.array_equal(pixels(implicit.images[0]), pixels(explicit.images[0]))
    whole = pipe(controlnets=[ControlNetUnit(controlnet, picture)], **{**options, "inpaint_full_res": False})
    assert not np.array_equal(pixels(implicit.images[0]), pixels(whole.images[0]))


def _control_maps(controlnet, run) -> list:
    """The control images (HxWx3, 0-255) the ControlNet saw at its first call of each run."""
    seen = []
    handle = controlnet.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs["controlnet_cond"][0].detach().clone()), with_kwargs=True)
    try:
        run()
    finally:
        handle.remove()
    return [np.rint(c.permute(1, 2, 0).numpy() * 255).astype(np.int16) for c in seen]


@pytest.mark.parametrize("unit_mode", ["crop and resize", "just resize"])
def test_only_masked_crops_a_control_image_of_any_size_at_the_masked_spot(tiny_sd1_dir, controlnet, unit_mode):
    """sd-webui-controlnet (scripts/controlnet.py, inpaint_full_res): every unit image is first resized to the mask's
    size with the unit's resize mode, then cropped to the crop region, then fitted with A1111's OUTER_FIT. A map made
    at half the init image's size therefore lands on the masked spot exactly as the full-size map does."""
    from pipelines.controlnet.pipelines import only_masked_control_image
    from pipelines.inpaint_mask import blur_mask, expand_crop_region, mask_bbox

    big = 2 * SIZE
    init = Image.new("RGB", (big, big), (90, 90, 90))
    mask = Image.new("L", (big, big), 0)
    mask.paste(255, (80, 80, 100, 100))
    full_map = Image.new("RGB", (big, big), "black")
    full_map.paste((255, 255, 255), (80, 80, 100, 100))  # white exactly where the mask is
    half_map = full_map.resize((SIZE, SIZE), Image.Resampling.NEAREST)
    pipe = ControlNetImageToImage.from_pretrained(tiny_sd1_dir)
    options = dict(init_images=[init], mask=mask, inpaint_full_res=True, inpaint_full_res_padding=8, mask_blur=0,
                   **{**SMALL, "steps": 1})
    full, half = (_control_maps(controlnet, lambda m=m: pipe(
        controlnets=[ControlNetUnit(controlnet, m, resize_mode=unit_mode)], **options))[0] for m in (full_map, half_map))
    crop = expand_crop_region(mask_bbox(blur_mask(mask, 0)), 8, SIZE, SIZE, big, big)
    box = (crop.left, crop.top, crop.right, crop.bottom)
    assert np.array_equal(half, pixels(only_masked_control_image(half_map, unit_mode, (big, big), box, SIZE, SIZE)))
    white_full, white_half = full[..., 0] > 127, half[..., 0] > 127
    assert white_full.mean() > 0.1  # the square fills a good part of the crop
    assert (white_full != white_half).mean() < 0.03  # same place, same size: only the edges of the square differ


@pytest.mark.parametrize("img2img_mode, unit_mode", [
    ("just resize", "crop and resize"),  # both defaults: the tester's case
    ("crop and resize", "just resize"),
    ("resize and fill", "crop and resize"),
])
def test_a_unit_without_image_gets_the_init_image_resized_as_img2img_resizes_it(tiny_sd1_dir, controlnet,
                                                                                img2img_mode, unit_mode):
    """sd-webui-controlnet resizes the init image for such a unit with img2img's resize mode (p.resize_mode), so
    the control map lines up with the picture being denoised; the unit's own mode is for its own image. The resize
    is the extension's control-map fit (`detectmap_proc`), which has the same geometry as img2img's resize."""
    from pipelines.controlnet.map_fit import fit_control_map

    init = Image.new("RGB", (2 * SIZE, SIZE), "black")
    init.paste((255, 255, 255), (0, 0, SIZE // 2, SIZE))  # a white band on the left quarter
    pipe = ControlNetImageToImage.from_pretrained(tiny_sd1_dir)
    seen = []
    handle = controlnet.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs["controlnet_cond"].detach().clone()), with_kwargs=True)
    try:
        pipe(init_images=[init], resize_mode=img2img_mode, controlnets=[ControlNetUnit(controlnet, resize_mode=unit_mode)],
             **{**SMALL, "steps": 2})
    finally:
        handle.remove()
    assert seen
    control = np.rint(seen[0][0].permute(1, 2, 0).numpy() * 255).astype(np.int16)
    assert np.array_equal(control, pixels(fit_control_map(init, SIZE, SIZE, img2img_mode)))
    assert not np.array_equal(control, pixels(fit_control_map(init, SIZE, SIZE, unit_mode)))
    if img2img_mode == "just resize":  # the band is at columns 0-15 of the denoised image, and of the control map
        assert (control[:, :SIZE // 4 - 1] > 200).all() and (control[:, SIZE // 4 + 1:] < 50).all()
