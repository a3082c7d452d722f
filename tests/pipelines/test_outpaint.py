"""Outpainting: new canvas size, the original area bit-identical, every masked-content mode, and bad input."""

import numpy as np
import pytest
from PIL import Image

from pipelines.img2img import ImageToImage
from pipelines.infotext import parse_infotext
from pipelines.outpaint import outpaint, outpaint_canvas

SMALL = dict(prompt="a field", seed=2, steps=3, sampler="Euler")


@pytest.fixture(scope="module")
def pipe(tiny_sd1_dir):
    return ImageToImage.from_pretrained(tiny_sd1_dir)


@pytest.fixture(scope="module")
def picture():
    return Image.fromarray(np.random.default_rng(5).integers(0, 255, (40, 48, 3), dtype=np.uint8))  # 48 wide, 40 high


def test_canvas_and_mask_place_the_image_and_mark_only_the_new_area(picture):
    canvas, mask = outpaint_canvas(picture, left=8, right=0, top=4, bottom=20)
    assert canvas.size == mask.size == (56, 64)
    assert np.array_equal(np.asarray(canvas)[4:44, 8:56], np.asarray(picture))
    m = np.asarray(mask)
    assert (m[4:44, 8:56] == 0).all() and (m[:4] == 255).all() and (m[44:] == 255).all() and (m[:, :8] == 255).all()


@pytest.mark.parametrize("fill", ["fill", "original", "latent noise", "latent nothing"])
def test_outpaint_size_and_original_area_bit_identical(pipe, picture, fill):
    result = outpaint(pipe, picture, left=8, right=8, top=12, bottom=12, inpainting_fill=fill, mask_blur=4, **SMALL)
    image = np.asarray(result.images[0])
    assert result.images[0].size == (64, 64)
    assert np.array_equal(image[12:52, 8:56], np.asarray(picture))
    assert image[:12].std() > 5  # the new band was painted, not left black
    params = parse_infotext(result.infotexts[0])
    assert (params["Size-1"], params["Size-2"], params["Mask blur"], params["Masked content"]) == ("64", "64", "4", fill)
    assert params["Denoising strength"] == "0.75"


def test_one_sided_outpaint(pipe, picture):
    result = outpaint(pipe, picture, right=16, top=24, **SMALL)
    assert result.images[0].size == (64, 64)
    assert np.array_equal(np.asarray(result.images[0])[24:, :48], np.asarray(picture))


@pytest.mark.parametrize("sides, message", [
    (dict(), "Nothing to outpaint"),
    (dict(left=5), "multiple of 8"),
    (dict(left=-8), "left must be"),
    (dict(top=8.0), "top must be"),
])
def test_bad_extensions_are_refused_before_running(pipe, picture, sides, message, monkeypatch):
    monkeypatch.setattr(pipe.model.unet, "forward", lambda *a, **k: pytest.fail("the UNet ran"))
    with pytest.raises(ValueError, match=message):
        outpaint(pipe, picture, **sides, **SMALL)


def test_reserved_arguments_are_refused(pipe, picture):
    with pytest.raises(TypeError, match="width"):
        outpaint(pipe, picture, left=16, width=64, **SMALL)
