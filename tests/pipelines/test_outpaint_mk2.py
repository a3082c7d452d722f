"""Outpainting mk2: A1111's masks and blurs around the matched-noise canvas, one inpainting pass from "original",
its infotext, and bad settings refused before anything runs."""

import numpy as np
import pytest
from PIL import Image, ImageDraw

from pipelines.img2img import ImageToImage
from pipelines.infotext import parse_infotext
from pipelines.matched_noise import matched_noise_fill
from pipelines.outpaint_mk2 import mk2_canvas, mk2_sides, outpaint_mk2

from .unet_spy import fail_if_called

SMALL = dict(prompt="a field", seed=2, steps=3, sampler="Euler")


@pytest.fixture(scope="module")
def pipe(tiny_sd1_dir):
    return ImageToImage.from_pretrained(tiny_sd1_dir)


@pytest.fixture(scope="module")
def picture():
    return Image.fromarray(np.random.default_rng(5).integers(0, 255, (40, 48, 3), dtype=np.uint8))  # 48 wide, 40 high


def a1111_mask(size, left, right, up, down, inset):
    """A keep rectangle inset on each extended side, as scripts/outpainting_mk_2.py draws its mask (inset mask_blur)
    and latent mask (inset 2 * mask_blur) around the picture."""
    width, height = size
    mask = Image.new("L", size, "white")
    ImageDraw.Draw(mask).rectangle((left + (inset if left else 0), up + (inset if up else 0),
                                    width - right - (inset if right else 0), height - down - (inset if down else 0)),
                                   fill="black")
    return mask


def test_canvas_fills_the_new_area_and_a_mask_blur_band_with_matched_noise(picture):
    filled, mask, keep = mk2_canvas(picture, 8, 0, 4, 20, mask_blur=3, falloff_exponent=1.0, color_variation=0.05)
    assert filled.size == mask.size == keep.size == (56, 64)
    assert np.array_equal(np.asarray(mask), np.asarray(a1111_mask((56, 64), 8, 0, 4, 20, 3)))
    assert np.array_equal(np.asarray(keep), np.asarray(a1111_mask((56, 64), 8, 0, 4, 20, 6)))
    black = Image.new("RGB", (56, 64))
    black.paste(picture, (8, 4))
    assert filled.tobytes() == matched_noise_fill(black, mask, seed=0).tobytes()  # A1111's fixed noise seed
    m, out = np.asarray(mask), np.asarray(filled)
    assert np.array_equal(out[m == 0], np.asarray(black)[m == 0])
    assert out[m > 0].std() > 10 and (out[:4] != 0).any()  # the new band is noise, not the black canvas


def test_one_pass_from_original_with_four_times_the_blur_on_the_extended_axes(pipe, picture, monkeypatch):
    seen = {}
    real_call = ImageToImage.__call__

    def recording_call(self, params=None, **kwargs):
        seen.update(kwargs)
        return real_call(self, params, **kwargs)

    monkeypatch.setattr(ImageToImage, "__call__", recording_call)
    result = outpaint_mk2(pipe, picture, left=8, right=8, mask_blur=1, denoising_strength=0.8, **SMALL)
    filled, mask, keep = mk2_canvas(picture, 8, 8, 0, 0, 1, 1.0, 0.05)
    assert seen["init_images"][0].tobytes() == filled.tobytes()
    assert (seen["mask"].tobytes(), seen["latent_mask"].tobytes()) == (mask.tobytes(), keep.tobytes())
    assert (seen["inpainting_fill"], seen["mask_blur_x"], seen["mask_blur_y"]) == ("original", 4, 0)
    assert result.images[0].size == (64, 40)
    # A1111 writes Mask blur only for equal axes (here 4 across, 0 down): none here
    fields = parse_infotext(result.infotexts[0])
    assert (fields["Masked content"], fields["Denoising strength"], fields["Size-1"]) == ("original", "0.8", "64")
    assert "Mask blur" not in parse_infotext(result.infotexts[0], defaults=False)
    out = np.asarray(result.images[0])
    # the mask reaches 1 pixel into the picture and is blurred across by sigma 4 (21 taps, 10 each side): the
    # picture is kept bit-identical from 11 pixels in, and the blend does eat into its outer columns
    assert np.array_equal(out[:, 8 + 11:56 - 11], np.asarray(picture)[:, 11:48 - 11])
    assert not np.array_equal(out[:, 8:8 + 4], np.asarray(picture)[:, :4])
    assert not np.array_equal(out[:, :8], np.asarray(filled)[:, :8])  # the new band was repainted


def test_extending_both_axes_records_a1111s_mask_blur(pipe, picture):
    result = outpaint_mk2(pipe, picture, right=16, top=24, mask_blur=1, **SMALL)
    assert result.images[0].size == (64, 64)
    assert parse_infotext(result.infotexts[0])["Mask blur"] == "4"


def test_sides_take_mk2s_pixel_range_and_round_as_poor_mans():
    assert mk2_sides(100, 72, 30, ["left"], 8) == {"left": 36, "right": 0, "top": 0, "bottom": 0}
    assert mk2_sides(48, 40, 256, ["up", "down"], 8) == {"left": 0, "right": 0, "top": 256, "bottom": 256}
    for pixels in (7, 257, 8.0, True):
        with pytest.raises(ValueError, match=r"pixels must be an integer in \[8, 256\] for Outpainting mk2"):
            mk2_sides(64, 64, pixels, ["left"], 8)


@pytest.mark.parametrize("kwargs, message", [
    (dict(left=8, mask_blur=33), r"mask_blur must be an integer in \[0, 32\] for Outpainting mk2"),
    (dict(left=8, mask_blur=2.0), "mask_blur must be an integer"),
    (dict(left=8, falloff_exponent=5), "falloff_exponent must be"),
    (dict(left=8, color_variation=-0.1), "color_variation must be"),
    (dict(), "Nothing to outpaint"),
    (dict(left=5), "multiple of 8"),
])
def test_bad_settings_are_refused_before_running(pipe, picture, kwargs, message, monkeypatch):
    fail_if_called(monkeypatch, pipe.model.unet)
    with pytest.raises(ValueError, match=message):
        outpaint_mk2(pipe, picture, **kwargs, **SMALL)


@pytest.mark.parametrize("name", ["width", "latent_mask", "mask_blur_x", "inpainting_fill"])
def test_reserved_arguments_are_refused(pipe, picture, name):
    with pytest.raises(TypeError, match=f"outpaint_mk2\\(\\) sets {name} itself"):
        outpaint_mk2(pipe, picture, left=16, **{name: 64}, **SMALL)
