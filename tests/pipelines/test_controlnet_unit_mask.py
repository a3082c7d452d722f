"""ControlNet unit masks and the inpaint preprocessors (inpaint = inpaint_global_harmonious, inpaint_only), on a tiny
ControlNet and SD 1.x model, against sd-webui-controlnet's formulas restated here:

- control image (scripts/hook.py, "ControlNet inpaint protocol"): hint = c * (1 - m) - m, m = (mask / 255) > 0.5;
- inpaint_only (scripts/controlnet.py `inpaint_only_post_processing`): y = m' x + (1 - m') picture, m' the mask
  dilated by a 7x7 square then box-blurred 7x7 (OpenCV defaults: reflect-101 borders for the blur);
- a drawn mask on another module is the picture ("Canvas scribble mode"), a blank one is ignored.
"""

import numpy as np
import pytest
import torch
from PIL import Image

from pipelines.controlnet import ControlNetImageToImage, ControlNetTextToImage, ControlNetUnit

from .tiny_images import noise_picture, box_mask

SIZE = 64
SMALL = dict(prompt="a cat", seed=5, width=SIZE, height=SIZE, steps=3, sampler="Euler")


@pytest.fixture(scope="module")
def txt2img(sd1_pipe):
    return ControlNetTextToImage.from_pipeline(sd1_pipe)


@pytest.fixture(scope="module")
def img2img(sd1_pipe):
    return ControlNetImageToImage.from_pipeline(sd1_pipe)


@pytest.fixture(scope="module")
def picture():
    return noise_picture(7)


@pytest.fixture(scope="module")
def mask():
    return box_mask((20, 16, 44, 40))


def seen_controls(controlnet, run) -> list:
    """The control tensors ([3, H, W]) the ControlNet got at each call of `run`."""
    seen = []
    handle = controlnet.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs["controlnet_cond"][0].detach().clone()), with_kwargs=True)
    try:
        result = run()
    finally:
        handle.remove()
    return seen, result


def extension_hint(picture, mask) -> torch.Tensor:
    c = torch.from_numpy(np.asarray(picture, dtype=np.float32) / 255.0).permute(2, 0, 1)
    m = (torch.from_numpy(np.asarray(mask, dtype=np.float32) / 255.0) > 0.5).float()[None]
    return c * (1 - m) - m


@pytest.mark.parametrize("module", ["inpaint", "inpaint_only"])
def test_the_controlnet_sees_the_picture_with_masked_pixels_at_minus_one(txt2img, controlnet, picture, mask, module):
    seen, _ = seen_controls(controlnet, lambda: txt2img(
        controlnets=[ControlNetUnit(controlnet, picture, preprocessor=module, mask=mask)], **SMALL))
    assert seen and all(torch.equal(control, extension_hint(picture, mask)) for control in seen)
    assert (seen[0] == -1).sum() == 3 * 24 * 24


def test_a_soft_mask_is_cut_at_half_and_an_rgb_mask_is_read_by_its_first_channel(txt2img, controlnet, picture):
    ramp = np.tile(np.arange(SIZE, dtype=np.uint8) * 4, (SIZE, 1))  # 0 .. 252 left to right
    rgb_mask = Image.fromarray(np.stack([ramp, np.zeros_like(ramp), np.zeros_like(ramp)], axis=2))
    seen, _ = seen_controls(controlnet, lambda: txt2img(
        controlnets=[ControlNetUnit(controlnet, picture, preprocessor="inpaint", mask=rgb_mask)], **{**SMALL, "steps": 1}))
    assert torch.equal(seen[0], extension_hint(picture, Image.fromarray(ramp)))
    assert (seen[0][:, :, :32] >= 0).all() and (seen[0][:, :, 32:] == -1).all()  # 4 * 32 = 128 > 127.5


def test_resize_and_fill_masks_the_bands_so_they_are_outpainted():
    """The extension's detectmap_proc gives the bands the border's median colour with alpha 255: painted."""
    from pipelines.controlnet.map_fit import fit_inpaint_map

    wide = Image.new("RGB", (64, 32), (200, 10, 10))
    colour, fitted = fit_inpaint_map(wide, np.zeros((32, 64), np.uint8), 64, 64, "resize and fill")
    assert (fitted[:16] == 255).all() and (fitted[48:] == 255).all() and (fitted[16:48] == 0).all()
    assert (colour == (200, 10, 10)).all()
    _, cropped = fit_inpaint_map(wide, np.zeros((32, 64), np.uint8), 64, 64, "crop and resize")
    assert (cropped == 0).all()


def test_a_mask_is_resized_with_its_picture_and_binarised():
    from pipelines.controlnet.map_fit import fit_inpaint_map

    big = Image.new("RGB", (128, 128), (90, 90, 90))
    mask = np.zeros((128, 128), np.uint8)
    mask[32:96, 32:96] = 255
    _, fitted = fit_inpaint_map(big, mask, 64, 64, "just resize")
    assert set(np.unique(fitted)) == {0, 255}
    assert (fitted[16:48, 16:48] == 255).all() and fitted.sum() == 255 * 32 * 32


def dilated_blurred(mask: np.ndarray, size: int = 7) -> np.ndarray:
    """cv2.dilate(mask, ones((7, 7))) then cv2.blur(., (7, 7)), restated with loops."""
    h, w = mask.shape
    half = size // 2
    dilated = np.array([[mask[max(0, y - half):y + half + 1, max(0, x - half):x + half + 1].max() for x in range(w)]
                        for y in range(h)])

    def reflect101(i, n):
        return -i if i < 0 else 2 * (n - 1) - i if i >= n else i

    return np.array([[np.mean([dilated[reflect101(y + dy, h), reflect101(x + dx, w)]
                               for dy in range(-half, half + 1) for dx in range(-half, half + 1)])
                      for x in range(w)] for y in range(h)])


def test_the_pixel_blend_is_the_extensions():
    from pipelines.controlnet.inpaint_only import restore_unmasked_pixels

    rng = np.random.default_rng(0)
    result, original = (rng.integers(0, 255, (20, 24, 3), dtype=np.uint8) for _ in range(2))
    mask = np.zeros((20, 24), np.uint8)
    mask[0:5, 10:14] = 255  # touching the top edge: the blur's mirrored border counts
    m = dilated_blurred(mask.astype(np.float64) / 255.0)[..., None]
    expected = np.rint((m * result / 255.0 + (1 - m) * original / 255.0) * 255)
    blended = np.asarray(restore_unmasked_pixels(Image.fromarray(result), original, mask)).astype(np.float64)
    assert np.abs(blended - expected).max() <= 1  # float32 here, float64 in the restatement: a rounding apart
    assert np.array_equal(blended[m[..., 0] == 0], original[m[..., 0] == 0])


def test_the_latent_blend_denoises_to_the_picture_outside_the_mask_at_full_weight():
    """eps' = w * eps(x0 = x0_pred * m + x0_picture * (1 - m)) + (1 - w) * eps: where m = 0 and w = 1 the output
    denoises exactly to the picture's latents, where m = 1 it is the model's own."""
    from types import SimpleNamespace

    from pipelines.controlnet.inpaint_only import InpaintOnlyBlend, KeptPicture, latent_keep_share

    mask = np.zeros((64, 64), np.uint8)
    mask[24:40, 24:40] = 255
    share = latent_keep_share(mask, 1.0)
    assert share[0, 0, 0, 0] == 1 and share[0, 0, 4, 4] == 0  # pooled 10x10 / stride 8: the mask grows a cell
    assert (share == 0).sum() == 4 * 4
    torch.manual_seed(0)
    picture, scaled, guided = torch.randn(1, 4, 8, 8), torch.randn(1, 4, 8, 8), torch.randn(1, 4, 8, 8)
    alphas = torch.linspace(0.99, 0.01, 1000)
    scheduler = SimpleNamespace(alphas_cumprod=alphas)
    out = InpaintOnlyBlend([KeptPicture(picture, share)]).guided_output(guided, None, scaled, scheduler, 0,
                                                                       timestep=torch.tensor(499.6))
    a = alphas[500]
    x0 = (scaled - (1 - a) ** 0.5 * out) / a ** 0.5
    keep = share[0, 0] == 1
    assert torch.allclose(x0[..., keep], picture[..., keep], atol=1e-5)
    assert torch.equal(out[..., ~keep], guided[..., ~keep])
    half = InpaintOnlyBlend([KeptPicture(picture, latent_keep_share(mask, 0.5))]).guided_output(
        guided, None, scaled, scheduler, 0, timestep=torch.tensor(500.0))
    assert torch.allclose(half, (out + guided) / 2, atol=1e-6)


def test_inpaint_only_keeps_the_unmasked_pixels_of_its_picture(txt2img, controlnet, picture, mask, monkeypatch):
    from pipelines.controlnet.inpaint_only import InpaintOnlyBlend

    blended = []
    latent_blend = InpaintOnlyBlend.guided_output
    monkeypatch.setattr(InpaintOnlyBlend, "guided_output",
                        lambda self, *args, **kwargs: blended.append(1) or latent_blend(self, *args, **kwargs))
    unit = ControlNetUnit(controlnet, picture, preprocessor="inpaint_only", mask=mask)
    kept = txt2img(controlnets=[unit], **SMALL)
    assert len(blended) == SMALL["steps"]  # Euler: one model call per step, each blended toward the picture
    harmonious = txt2img(controlnets=[ControlNetUnit(controlnet, picture, preprocessor="inpaint", mask=mask)], **SMALL)
    out, original = (np.asarray(image).astype(np.int16) for image in (kept.images[0], picture))
    untouched = dilated_blurred(np.asarray(mask, dtype=np.float64) / 255.0) == 0
    assert untouched.mean() > 0.5
    assert np.array_equal(out[untouched], original[untouched])
    assert np.abs(out[~untouched] - original[~untouched]).mean() > 1  # the masked area is painted
    assert np.abs(np.asarray(harmonious.images[0]).astype(np.int16)[untouched] - original[untouched]).mean() > 1
    assert 'ControlNet 0: "Module: inpaint_only, ' in kept.infotexts[0]


def test_inpaint_only_in_img2img_inpainting_runs_as_inpaint(img2img, controlnet, picture, mask):
    """'A1111 inpaint and ControlNet inpaint duplicated. Falls back to inpaint_global_harmonious.'"""
    options = dict(init_images=[picture], mask=mask, denoising_strength=0.75, **SMALL)
    only = img2img(controlnets=[ControlNetUnit(controlnet, picture, preprocessor="inpaint_only", mask=mask)], **options)
    harmonious = img2img(controlnets=[ControlNetUnit(controlnet, picture, preprocessor="inpaint", mask=mask)], **options)
    assert np.array_equal(np.asarray(only.images[0]), np.asarray(harmonious.images[0]))
    assert "Module: inpaint_only" in only.infotexts[0]


def test_a_unit_without_image_takes_the_init_image_and_the_prepared_img2img_mask(img2img, controlnet, picture, mask):
    from pipelines.inpaint_mask import blur_mask, prepare_mask

    seen, _ = seen_controls(controlnet, lambda: img2img(
        init_images=[picture], mask=mask, mask_blur=4, inpainting_mask_invert=True, denoising_strength=0.5,
        controlnets=[ControlNetUnit(controlnet, preprocessor="inpaint")], **{**SMALL, "steps": 2}))
    prepared = blur_mask(prepare_mask(mask, picture.size, invert=True), 4)
    assert torch.equal(seen[0], extension_hint(picture, np.where(np.asarray(prepared) > 127, 255, 0)))
    plain, _ = seen_controls(controlnet, lambda: img2img(
        init_images=[picture], controlnets=[ControlNetUnit(controlnet, preprocessor="inpaint")],
        **{**SMALL, "steps": 2}))
    assert torch.equal(plain[0], extension_hint(picture, np.zeros((SIZE, SIZE))))  # no img2img mask: none masked


def test_a_drawn_mask_on_another_module_is_its_picture_and_a_blank_one_is_ignored(txt2img, controlnet, picture):
    drawing = Image.new("L", (SIZE, SIZE), 0)
    drawing.paste(200, (10, 10, 30, 50))
    seen, _ = seen_controls(controlnet, lambda: txt2img(
        controlnets=[ControlNetUnit(controlnet, picture, preprocessor="invert", mask=drawing)], **{**SMALL, "steps": 1}))
    expected = 1 - torch.from_numpy(np.asarray(drawing.convert("RGB"), dtype=np.float32) / 255).permute(2, 0, 1)
    assert torch.allclose(seen[0], expected)
    for blank in (Image.new("L", (SIZE, SIZE), 3), Image.new("L", (SIZE, SIZE), 251)):
        ignored, _ = seen_controls(controlnet, lambda: txt2img(
            controlnets=[ControlNetUnit(controlnet, picture, mask=blank)], **{**SMALL, "steps": 1}))
        assert torch.allclose(ignored[0], torch.from_numpy(np.asarray(picture, dtype=np.float32) / 255).permute(2, 0, 1))


@pytest.mark.parametrize("fields, error, message", [
    (dict(mask=Image.new("L", (32, 64))), ValueError, "mask is 32x64 but the unit's image is 64x64"),
    (dict(mask=np.zeros((64, 64))), TypeError, "mask must be a PIL image"),
    (dict(preprocessor="inpaint_only+lama"), ValueError, "LaMa"),
])
def test_bad_masks_and_lama_are_refused_before_any_work(txt2img, controlnet, picture, fields, error, message):
    calls = []
    handle = txt2img.model.unet.register_forward_pre_hook(lambda *args: calls.append(1))
    try:
        with pytest.raises(error, match=message):
            txt2img(controlnets=[ControlNetUnit(controlnet, **{"image": picture, "preprocessor": "inpaint", **fields})],
                    **SMALL)
    finally:
        handle.remove()
    assert not calls


def test_a_mask_without_the_units_image_is_refused_in_img2img(img2img, controlnet, picture, mask):
    with pytest.raises(ValueError, match="ControlNet 0: a mask needs the unit's own image"):
        img2img(init_images=[picture], controlnets=[ControlNetUnit(controlnet, preprocessor="inpaint", mask=mask)],
                **SMALL)


def test_inpaint_only_with_hires_fix_keeps_the_picture_in_both_passes(txt2img, controlnet, picture, mask, monkeypatch):
    """As the extension runs it with its hires control: the latent blend at each pass's size, the pixel blend onto the
    picture fitted to the hires size, on the finished image only."""
    from pipelines.controlnet import prepare_control_images
    from pipelines.controlnet.inpaint_only import InpaintOnlyBlend
    from pipelines.hires import HiresFix

    sizes = []
    latent_blend = InpaintOnlyBlend.guided_output
    monkeypatch.setattr(InpaintOnlyBlend, "guided_output", lambda self, guided, *args, **kwargs: sizes.append(
        tuple(guided.shape[-2:])) or latent_blend(self, guided, *args, **kwargs))
    unit = ControlNetUnit(controlnet, picture, preprocessor="inpaint_only", mask=mask)
    result = HiresFix(txt2img)(controlnets=[unit], hr_scale=2.0, hr_upscaler="Latent", hr_second_pass_steps=2,
                               denoising_strength=0.7, **SMALL)
    assert sizes == [(8, 8)] * SMALL["steps"] + [(16, 16)] * 2  # Euler: one model call per step of each pass
    hires_control = prepare_control_images([unit], 2 * SIZE, 2 * SIZE)[0]
    out = np.asarray(result.images[0]).astype(np.int16)
    assert out.shape == (2 * SIZE, 2 * SIZE, 3)
    untouched = dilated_blurred(hires_control.mask.astype(np.float64) / 255.0) == 0
    assert untouched.mean() > 0.5
    original = np.asarray(hires_control.image).astype(np.int16)
    assert np.array_equal(out[untouched], original[untouched])
    assert np.abs(out[~untouched] - original[~untouched]).mean() > 1  # the masked area is painted
    assert 'ControlNet 0: "Module: inpaint_only, ' in result.infotexts[0] and "Hires upscale: 2" in result.infotexts[0]
