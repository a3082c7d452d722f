"""The inpainting infotext says what ran, with A1111's keys: no "Only masked" when a blank mask sent the call to the
whole image, and "Mask blur" only when there is a blur (A1111 leaves out 0)."""

import numpy as np
import pytest
from PIL import Image

from pipelines.img2img import ImageToImage
from pipelines.infotext import parse_infotext

SMALL = dict(width=64, height=64, steps=2, seed=3, prompt="a red circle", sampler="Euler")


@pytest.fixture(scope="module")
def i2i(sd1_pipe):
    return ImageToImage.from_pipeline(sd1_pipe)


def noise_image():
    return Image.fromarray(np.random.default_rng(1).integers(0, 256, (64, 64, 3), dtype=np.uint8))


def infotext(i2i, mask, **kwargs):
    """The keys the infotext itself holds (no A1111 defaults filled in)."""
    text = i2i(init_images=[noise_image()], mask=mask, **{**SMALL, **kwargs}).infotexts[0]
    return parse_infotext(text, defaults=False)


def test_only_masked_with_a_blank_mask_is_recorded_as_the_whole_image(i2i):
    blank = Image.new("L", (64, 64), 0)
    text = i2i(init_images=[noise_image()], mask=blank, inpaint_full_res=True, inpaint_full_res_padding=16,
               **SMALL).infotexts[0]
    assert "Inpaint area" not in parse_infotext(text, defaults=False)
    assert "Masked area padding" not in parse_infotext(text, defaults=False)
    assert parse_infotext(text)["Inpaint area"] == "Whole picture"  # what A1111 reads, and what ran
    everything = Image.new("L", (64, 64), 255)  # inverted: repaints nothing, so the whole image again
    params = infotext(i2i, everything, inpaint_full_res=True, inpainting_mask_invert=True)
    assert "Inpaint area" not in params and params["Mask mode"] == "Inpaint not masked"


def test_only_masked_with_strokes_is_recorded(i2i):
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (20, 20, 30, 30))
    params = infotext(i2i, mask, inpaint_full_res=True, inpaint_full_res_padding=8)
    assert (params["Inpaint area"], params["Masked area padding"]) == ("Only masked", "8")


def test_mask_blur_is_written_only_when_positive(i2i):
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (20, 20, 30, 30))
    assert "Mask blur" not in infotext(i2i, mask, mask_blur=0)
    assert infotext(i2i, mask, mask_blur=3)["Mask blur"] == "3"
