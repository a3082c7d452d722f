"""Masks with their strokes in the alpha channel are read as A1111's `create_binary_mask` reads them, in the Python
API and in the web API alike (one function, `pipelines.inpaint_mask.binary_mask`)."""

import base64
import io

import numpy as np
import pytest
from PIL import Image

from pipelines.img2img import ImageToImage
from pipelines.inpaint_mask import binary_mask, prepare_mask

BOX = (16, 16, 48, 48)
SMALL = dict(width=64, height=64, steps=4, seed=3, prompt="a red circle", sampler="Euler", mask_blur=0,
             inpainting_fill="original", denoising_strength=0.9)


def alpha_strokes(colour):
    """A1111's canvas mask: opaque strokes (of any colour) over the box on a transparent layer."""
    mask = Image.new("RGBA", (64, 64), colour + (0,))
    mask.paste(colour + (255,), BOX)
    return mask


def expected_binary():
    expected = np.zeros((64, 64), dtype=np.uint8)
    expected[BOX[1]:BOX[3], BOX[0]:BOX[2]] = 255
    return expected


def noise_image(seed):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (64, 64, 3), dtype=np.uint8))


@pytest.mark.parametrize("colour", [(0, 0, 0), (255, 255, 255), (200, 30, 30)])
def test_alpha_strokes_are_the_mask_whatever_their_colour(colour):
    assert np.array_equal(np.asarray(binary_mask(alpha_strokes(colour))), expected_binary())
    assert np.array_equal(np.asarray(prepare_mask(alpha_strokes(colour), (64, 64))), expected_binary())
    inverted = np.asarray(prepare_mask(alpha_strokes(colour), (64, 64), invert=True))
    assert np.array_equal(inverted, 255 - expected_binary())


def test_alpha_is_thresholded_above_128_like_a1111():
    mask = Image.new("RGBA", (4, 1), (0, 0, 0, 0))
    for x, alpha in enumerate((0, 128, 129, 255)):
        mask.putpixel((x, 0), (0, 0, 0, alpha))
    assert np.asarray(binary_mask(mask)).tolist() == [[0, 0, 255, 255]]


def test_opaque_rgba_and_greyscale_masks_are_their_grey_levels():
    grey = Image.new("L", (8, 8), 0)
    grey.paste(100, (0, 0, 4, 8))
    assert np.array_equal(np.asarray(binary_mask(grey)), np.asarray(grey))
    opaque = grey.convert("RGBA")  # alpha 255 everywhere: A1111 converts to L
    assert np.array_equal(np.asarray(binary_mask(opaque)), np.asarray(grey))


def test_python_api_repaints_exactly_the_alpha_strokes(sd1_pipe):
    i2i = ImageToImage.from_pipeline(sd1_pipe)
    image = noise_image(4)
    for colour in ((0, 0, 0), (255, 255, 255)):
        out = np.asarray(i2i(init_images=[image], mask=alpha_strokes(colour), **SMALL).images[0]).astype(int)
        inside = expected_binary() == 255
        assert np.array_equal(out[~inside], np.asarray(image).astype(int)[~inside])  # outside the strokes: untouched
        assert np.abs(out[inside] - np.asarray(image).astype(int)[inside]).mean() > 5  # the strokes: repainted


def _b64_png(image):
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.parametrize("colour", [(0, 0, 0), (255, 255, 255)])
def test_web_api_reads_an_a1111_canvas_mask_the_same_way(colour):
    from pipelines.params import GenerationLimits
    from webui.api_convert import RequestLimits, to_img2img_params
    from webui.api_requests import Img2ImgRequest

    request = Img2ImgRequest(init_images=[_b64_png(noise_image(4))], mask="data:image/png;base64," + _b64_png(
        alpha_strokes(colour)), steps=2, width=64, height=64, inpaint_full_res=False)
    params = to_img2img_params(request, limits=GenerationLimits(), request_limits=RequestLimits(), lora_names=set())
    assert params.mask.mode == "L"
    assert np.array_equal(np.asarray(params.mask), expected_binary())
