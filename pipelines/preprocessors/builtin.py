"""Preprocessors that need no model weights: pure image operations on PIL/numpy."""

from __future__ import annotations

from pipelines.preprocessors.canny import canny_edges
from pipelines.preprocessors.registry import Preprocessor, Slider, register_preprocessor


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
    """Binary map as sd-webui-controlnet's `threshold` module: white where every channel is above `level`
    (the pixel's channel minimum > level), black elsewhere; bright shapes on dark become white on black."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(image)
    return Image.fromarray(np.where(pixels.min(axis=2) > level, 255, 0).astype(np.uint8)).convert("RGB")


def _monochrome(image, _a, _b):
    """Greyscale copy, for QR-code / illusion ControlNets fed with coloured pictures."""
    return image.convert("L").convert("RGB")


def _blur(image, sigma, _b):
    from PIL import ImageFilter

    return image.filter(ImageFilter.GaussianBlur(sigma))


# sd-webui-controlnet's tile_resample leaves the picture untouched below this down-sampling rate.
TILE_RESAMPLE_MIN_RATE = 1.1


def _tile_resample(image, down_sampling, _b):
    """Tile ControlNets want a low-detail copy: shrink by `down_sampling`, then back to the picture's size.

    As the extension: a rate below 1.1 returns the picture unchanged; the small size is floored
    (`int(H / rate)`) and shrunk by area averaging. The extension then brings the small map to the
    generation size with its cubic map resize; here it comes back to the picture's size with that filter.
    """
    import numpy as np
    from PIL import Image

    from pipelines.controlnet.map_fit import area_resize, cubic_resize

    if down_sampling < TILE_RESAMPLE_MIN_RATE:
        return image
    width, height = image.size
    small_size = (max(1, int(width / down_sampling)), max(1, int(height / down_sampling)))
    small = area_resize(np.asarray(image), *small_size)
    return Image.fromarray(cubic_resize(small, width, height))


# The extension's sliders (`preprocessor_sliders_config`: labels, defaults, UI ranges). Canny and threshold compare a
# number, tile_resample divides by one (below 1.1: unchanged): any value >= 0 is defined. A blur sigma stays in the
# slider's range: PIL crashes on huge ones and the extension's cv2.GaussianBlur refuses 0.
for _entry in (
    Preprocessor("none", _none),
    Preprocessor("canny", _canny, threshold_a=Slider("Canny Low Threshold", 100, 1, 255),
                 threshold_b=Slider("Canny High Threshold", 200, 1, 255)),
    Preprocessor("invert", _invert),
    Preprocessor("threshold", _threshold, threshold_a=Slider("Binarization Threshold", 127, 0, 255)),
    Preprocessor("monochrome", _monochrome),
    Preprocessor("blur_gaussian", _blur, threshold_a=Slider("Sigma", 9.0, 0.01, 64.0, accepts=(0.01, 64.0))),
    Preprocessor("tile_resample", _tile_resample, threshold_a=Slider("Down Sampling Rate", 1.0, 1.0, 8.0, step=0.01)),
    # The extension's inpaint modules return the picture as given: the unit's mask is what makes the control
    # (masked pixels -1, pipelines.controlnet.unit_mask); inpaint_only also keeps the unmasked area.
    Preprocessor("inpaint", _none, takes_mask=True),
    Preprocessor("inpaint_only", _none, takes_mask=True),
):
    register_preprocessor(_entry)
