"""lineart_standard and scribble_xdog against a restatement of sd-webui-controlnet's formulas (`scripts/processor.py`)
with the OpenCV blur it calls, and their numpy Gaussian against `cv2.GaussianBlur` itself."""

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter

from pipelines.preprocessors import run_preprocessor
from pipelines.preprocessors.lines import gaussian_blur


def drawing() -> Image.Image:
    """Dark strokes of several widths and greys on a light, slightly coloured page."""
    page = Image.new("RGB", (96, 72), (235, 230, 220))
    draw = ImageDraw.Draw(page)
    draw.line((5, 60, 90, 8), fill=(20, 20, 30), width=2)
    draw.ellipse((20, 15, 60, 55), outline=(90, 60, 40), width=4)
    draw.rectangle((65, 40, 88, 66), outline=(140, 140, 150), width=1)
    return page.filter(ImageFilter.GaussianBlur(0.6))


@pytest.mark.parametrize("sigma", [0.5, 5.0, 6.0])
def test_gaussian_blur_matches_opencv_on_float_images(sigma):
    cv2 = pytest.importorskip("cv2")  # test extra: opencv-python-headless
    pixels = np.asarray(drawing()).astype(np.float32)
    np.testing.assert_allclose(gaussian_blur(pixels, sigma), cv2.GaussianBlur(pixels, (0, 0), sigma), atol=1e-3)


def extension_lineart_standard(pixels, cv2):
    """The extension's lineart_standard after `resize_image_with_pad`: darkness below the sigma-6 blur, channel
    minimum, clipped to 0-255, divided by max(16, median of the values above 8), times 127, to uint8."""
    x = pixels.astype(np.float32)
    darker = np.min(cv2.GaussianBlur(x, (0, 0), 6.0) - x, axis=2).clip(0, 255)
    darker /= max(16, np.median(darker[darker > 8]))
    return (darker * 127).clip(0, 255).astype(np.uint8)


def extension_scribble_xdog(pixels, level, cv2):
    """The extension's scribble_xdog: 255 - channel minimum of blur(5) - blur(0.5), as uint8; white where
    2 * (255 - that), computed in uint8, exceeds the level."""
    x = pixels.astype(np.float32)
    dog = (255 - np.min(cv2.GaussianBlur(x, (0, 0), 5.0) - cv2.GaussianBlur(x, (0, 0), 0.5), axis=2))
    dog = dog.clip(0, 255).astype(np.uint8)
    out = np.zeros(dog.shape, dtype=np.uint8)
    out[np.uint8(2) * (np.uint8(255) - dog) > level] = 255
    return out


def test_lineart_standard_is_the_extensions_formula():
    cv2 = pytest.importorskip("cv2")
    pixels = np.asarray(drawing())
    ours = np.asarray(run_preprocessor("lineart_standard", drawing()))
    theirs = extension_lineart_standard(pixels, cv2)
    assert (ours == ours[..., :1]).all()  # grey RGB
    assert np.abs(ours[..., 0].astype(int) - theirs).max() <= 1  # float32 sums in another order: a grey level at most
    assert (ours[..., 0] != theirs).mean() < 0.01 and theirs.max() > 127 and (theirs == 0).mean() > 0.5


@pytest.mark.parametrize("level", [32, 8, 60])
def test_scribble_xdog_is_the_extensions_formula_wrap_included(level):
    cv2 = pytest.importorskip("cv2")
    pixels = np.asarray(drawing())
    ours = np.asarray(run_preprocessor("scribble_xdog", drawing(), threshold_a=level))[..., 0]
    theirs = extension_scribble_xdog(pixels, level, cv2)
    assert (ours != theirs).mean() < 0.005 and (theirs == 255).any()


def test_line_maps_without_opencv():
    """White lines on black where the page has dark strokes; a blank page gives an empty map (the extension's NaN
    median falls back to 16)."""
    blank = Image.new("RGB", (40, 30), (200, 200, 200))
    assert np.asarray(run_preprocessor("lineart_standard", blank)).max() == 0
    assert np.asarray(run_preprocessor("scribble_xdog", blank)).max() == 0
    lines = np.asarray(run_preprocessor("lineart_standard", drawing()))[..., 0]
    assert lines[60, 5] > 100 and lines[5, 5] == 0
    assert gaussian_blur(np.full((9, 7, 3), 50.0, dtype=np.float32), 6.0) == pytest.approx(50.0)

