"""Preprocessors that need no model weights: pure image operations on PIL/numpy."""

from __future__ import annotations

from pipelines.preprocessors.canny import canny_edges
from pipelines.preprocessors.registry import Preprocessor, register_preprocessor


def _none(image, _a, _b):
    """The control image is used as given (already a map, or a QR code / monochrome pattern)."""
    return image


def _canny(image, low, high):
    import numpy as np
    from PIL import Image

    edges = canny_edges(np.asarray(image), low, high)
    return Image.fromarray(edges).convert("RGB")


def _invert(image, _a, _b):
    """Black lines on white (a drawing) -> white lines on black, what lineart/scribble models expect."""
    from PIL import ImageOps

    return ImageOps.invert(image)


def _threshold(image, level, _b):
    """Binary scribble map: pixels darker than `level` become white lines on black."""
    grey = image.convert("L")
    return grey.point(lambda v: 255 if v < level else 0).convert("RGB")


def _monochrome(image, _a, _b):
    """Greyscale copy, for QR-code / illusion ControlNets fed with coloured pictures."""
    return image.convert("L").convert("RGB")


def _blur(image, sigma, _b):
    from PIL import ImageFilter

    return image.filter(ImageFilter.GaussianBlur(sigma))


def _tile_resample(image, down_sampling, _b):
    """Tile ControlNets want a low-detail copy: downsample by `down_sampling`, then back up."""
    from PIL import Image

    width, height = image.size
    small = image.resize((max(1, round(width / down_sampling)), max(1, round(height / down_sampling))),
                         Image.Resampling.BICUBIC)
    return small.resize((width, height), Image.Resampling.BICUBIC)


for _entry in (
    Preprocessor("none", _none),
    # Same defaults and ranges as sd-webui-controlnet's canny sliders (low 100, high 200, 1..255).
    Preprocessor("canny", _canny, threshold_a=(100, 1, 255), threshold_b=(200, 1, 255)),
    Preprocessor("invert", _invert),
    Preprocessor("threshold", _threshold, threshold_a=(127, 0, 255)),
    Preprocessor("monochrome", _monochrome),
    Preprocessor("blur_gaussian", _blur, threshold_a=(9.0, 0.01, 64.0)),
    Preprocessor("tile_resample", _tile_resample, threshold_a=(1.0, 1.0, 8.0)),
):
    register_preprocessor(_entry)
