"""Outpainting: new canvas size, A1111's Poor man's outpainting masks and blend, every masked-content mode, and
bad input."""

import numpy as np
import pytest
from PIL import Image, ImageDraw

import pipelines.img2img as img2img_module
from pipelines.img2img import ImageToImage
from pipelines.infotext import parse_infotext
from pipelines.inpaint_mask import blur_mask, latent_mask, paste_back, whole_picture_overlay
from pipelines.outpaint import outpaint, outpaint_canvas

from .unet_spy import fail_if_called

SMALL = dict(prompt="a field", seed=2, steps=3, sampler="Euler")


@pytest.fixture(scope="module")
def pipe(tiny_sd1_dir):
    return ImageToImage.from_pretrained(tiny_sd1_dir)


@pytest.fixture(scope="module")
def picture():
    return Image.fromarray(np.random.default_rng(5).integers(0, 255, (40, 48, 3), dtype=np.uint8))  # 48 wide, 40 high


def a1111_masks(size, left, right, up, down, mask_blur):
    """The two masks of A1111's scripts/poor_mans_outpainting.py, drawn with its own rectangle arithmetic."""
    width, height = size
    masks = []
    for inset in (mask_blur * 2, mask_blur // 2):
        mask = Image.new("L", size, "white")
        ImageDraw.Draw(mask).rectangle((left + (inset if left > 0 else 0), up + (inset if up > 0 else 0),
                                        width - right - (inset if right > 0 else 0),
                                        height - down - (inset if down > 0 else 0)), fill="black")
        masks.append(mask)
    return masks


def test_canvas_and_masks_follow_a1111s_insets(picture):
    canvas, mask, keep = outpaint_canvas(picture, left=8, right=0, top=4, bottom=20, mask_blur=4)
    assert canvas.size == mask.size == keep.size == (56, 64)
    assert np.array_equal(np.asarray(canvas)[4:44, 8:56], np.asarray(picture))
    expected_mask, expected_keep = a1111_masks((56, 64), 8, 0, 4, 20, 4)
    assert np.array_equal(np.asarray(mask), np.asarray(expected_mask))
    assert np.array_equal(np.asarray(keep), np.asarray(expected_keep))
    m, k = np.asarray(mask), np.asarray(keep)
    # the keep rectangle: x 8+8 .. 56 (inclusive corners), y 4+8 .. 64-20-8; the latent one inset by 4 // 2 = 2
    assert (m[12:37, 16:] == 0).all() and (m[11, 16:] == 255).all() and (m[37, 16:] == 255).all()
    assert (m[12:37, 15] == 255).all()
    assert (k[6:43, 10:] == 0).all() and (k[5, 10:] == 255).all() and (k[43, 10:] == 255).all()


def test_at_blur_0_the_mask_is_exactly_the_new_area(picture):
    # A1111's inclusive corner would keep column 48 / row 44 of the black canvas (a black line); not kept here
    canvas, mask, keep = outpaint_canvas(picture, left=8, right=8, top=4, bottom=20, mask_blur=0)
    for drawn in (mask, keep):
        m = np.asarray(drawn)
        assert (m[4:44, 8:56] == 0).all() and (m == 0).sum() == 40 * 48


def test_a_picture_smaller_than_the_insets_is_repainted_whole():
    _, mask, keep = outpaint_canvas(Image.new("RGB", (8, 8)), left=8, right=8, top=0, bottom=0, mask_blur=4)
    assert (np.asarray(mask) == 255).all()  # x 16 .. 8: A1111's Pillow would refuse; nothing is kept
    assert (np.asarray(keep) == 0).any()


def test_the_generated_border_blends_into_the_old_picture_as_a1111s(pipe, monkeypatch):
    # A1111: mask blurred with sigma 2 * mask_blur, pasted back with that blurred mask doubled; latent mask unblurred.
    image = Image.fromarray(np.random.default_rng(3).integers(0, 255, (64, 64, 3), dtype=np.uint8))
    seen = {}
    real_paste, real_prepare = img2img_module.paste_back, ImageToImage._prepare_inpaint

    def recording_paste(generated, original, overlay):
        seen.update(generated=generated, original=original, overlay=overlay)
        return real_paste(generated, original, overlay)

    def recording_prepare(self, params, images):
        seen["inputs"] = real_prepare(self, params, images)
        return seen["inputs"]

    monkeypatch.setattr(img2img_module, "paste_back", recording_paste)
    monkeypatch.setattr(ImageToImage, "_prepare_inpaint", recording_prepare)
    result = outpaint(pipe, image, right=64, mask_blur=4, denoising_strength=0.8, **SMALL)
    mask, keep = a1111_masks((128, 64), 0, 64, 0, 0, 4)
    overlay = whole_picture_overlay(blur_mask(mask, 8))
    assert np.array_equal(np.asarray(seen["overlay"]), np.asarray(overlay))
    assert np.array_equal(seen["inputs"].latent_mask.numpy(), latent_mask(keep, (16, 8)).numpy())
    canvas = Image.new("RGB", (128, 64))
    canvas.paste(image)
    expected = paste_back(seen["generated"], canvas, overlay)
    out = np.asarray(result.images[0])
    assert np.array_equal(out, np.asarray(expected))
    ramp = np.asarray(overlay)[0]
    # the blend zone lies inside the old picture: the mask edge (x 57) blurred and doubled ramps up over 37..56
    assert ramp[36] == 0 and 0 < ramp[37] and ramp[56] < 255 and (ramp[57:] == 255).all()
    assert np.array_equal(out[:, :37], np.asarray(image)[:, :37])  # untouched outside the blurred mask
    assert not np.array_equal(out[:, 50:64], np.asarray(image)[:, 50:64])  # the old seam is repainted
    assert parse_infotext(result.infotexts[0])["Mask blur"] == "8"  # A1111 records p.mask_blur = mask_blur * 2


@pytest.mark.parametrize("fill", ["fill", "original", "latent noise", "latent nothing"])
def test_outpaint_size_and_original_area_kept_outside_the_blend(pipe, picture, fill):
    result = outpaint(pipe, picture, left=8, right=8, top=12, bottom=12, inpainting_fill=fill, mask_blur=1, **SMALL)
    image = np.asarray(result.images[0])
    assert result.images[0].size == (64, 64)
    # blur 1: the mask rectangle is inset by 2 and blurred with sigma 2 (5 pixels each side) -> 7 pixels in
    assert np.array_equal(image[19:45, 15:49], np.asarray(picture)[7:33, 7:41])
    assert image[:12].std() > 5  # the new band was painted, not left black
    params = parse_infotext(result.infotexts[0])
    assert (params["Size-1"], params["Size-2"], params["Mask blur"], params["Masked content"]) == \
        ("64", "64", "2", fill)
    assert params["Denoising strength"] == "0.75"


def test_one_sided_outpaint_keeps_the_sides_it_does_not_extend(pipe, picture):
    result = outpaint(pipe, picture, right=16, top=24, **SMALL)
    assert result.images[0].size == (64, 64)
    # blur 4: inset 8 on the right and top, blurred with sigma 8 (2 * int(20.5) + 1 = 41 taps: 20 each side)
    assert np.array_equal(np.asarray(result.images[0])[24 + 28:, :48 - 28], np.asarray(picture)[28:, :20])


@pytest.mark.parametrize("sides, message", [
    (dict(), "Nothing to outpaint"),
    (dict(left=5), "multiple of 8"),
    (dict(left=-8), "left must be"),
    (dict(top=8.0), "top must be"),
    (dict(left=8, mask_blur=65), "mask_blur must be"),
])
def test_bad_extensions_are_refused_before_running(pipe, picture, sides, message, monkeypatch):
    fail_if_called(monkeypatch, pipe.model.unet)
    with pytest.raises(ValueError, match=message):
        outpaint(pipe, picture, **sides, **SMALL)


@pytest.mark.parametrize("name", ["width", "latent_mask", "mask_blur_x"])
def test_reserved_arguments_are_refused(pipe, picture, name):
    with pytest.raises(TypeError, match=name):
        outpaint(pipe, picture, left=16, **{name: 64}, **SMALL)


def a1111_sides(width, height, pixels, direction):
    """scripts/poor_mans_outpainting.py's per-side pixels, with its own arithmetic (its size step is 64)."""
    import math

    left, right = (pixels if "left" in direction else 0), (pixels if "right" in direction else 0)
    up, down = (pixels if "up" in direction else 0), (pixels if "down" in direction else 0)
    target_w, target_h = math.ceil((width + left + right) / 64) * 64, math.ceil((height + up + down) / 64) * 64
    left = left * (target_w - width) // (left + right) if left else 0
    right = target_w - width - left if right else 0
    up = up * (target_h - height) // (up + down) if up else 0
    down = target_h - height - up if down else 0
    return {"left": left, "right": right, "top": up, "bottom": down}


@pytest.mark.parametrize("width, height, pixels, direction", [
    (90, 70, 128, ["left", "right", "up", "down"]), (512, 512, 8, ["left", "up"]), (100, 75, 56, ["right", "down"]),
    (333, 200, 200, ["left", "right", "down"]), (64, 64, 64, ["up", "down", "left"]),
])
def test_sides_share_the_rounding_as_a1111_when_both_axes_grow(width, height, pixels, direction):
    from pipelines.outpaint import outpaint_sides

    assert outpaint_sides(width, height, pixels, direction, 64) == a1111_sides(width, height, pixels, direction)


def test_an_axis_not_extended_keeps_its_size():
    from pipelines.outpaint import outpaint_sides

    # A1111 would round the height 64 -> 64 here, but 72 -> 128 with a never-repainted black band; mixkit keeps 72.
    assert outpaint_sides(100, 72, 30, ["left"], 8) == {"left": 36, "right": 0, "top": 0, "bottom": 0}
    with pytest.raises(ValueError, match="width 100 is not a multiple of 8 and outpainting does not extend it"):
        outpaint_sides(100, 72, 30, ["up"], 8)


@pytest.mark.parametrize("pixels, direction, message", [
    (0, ["left"], "pixels must be an integer"), (True, ["left"], "pixels must be an integer"),
    (8, [], "directions must be a non-empty list"), (8, "left", "directions must be a non-empty list"),
    (8, ["north"], "directions must be a non-empty list"),
])
def test_bad_pixels_or_directions_are_refused(pixels, direction, message):
    from pipelines.outpaint import outpaint_sides

    with pytest.raises(ValueError, match=message):
        outpaint_sides(64, 64, pixels, direction, 8)
