"""sd-webui-controlnet's preprocessor resolution: `processor_res` and "Pixel Perfect".

In the extension a preprocessor does not see the control image at the generation size: it resizes the
picture so that its short side is the preprocessor resolution (`resize_image_with_pad`: x k with
k = resolution / min(H, W), sides rounded, then edge-padded to multiples of 64 and the padding cut off
the result), detects there, and the detected map is then brought to the generation size by the unit's
resize mode. `processor_res` is that resolution (512 by default); "Pixel Perfect" computes it from the
picture and the target size instead (`pixel_perfect_resolution`), so the map is detected at about the
scale it is used at.

Only the extension's modules that call `resize_image_with_pad` have a resolution (canny, threshold, lineart_standard,
scribble_xdog, blur_gaussian, the depth estimators); for none, invert, tile_resample and monochrome it changes
nothing there, and nothing here. Resampling to the resolution is PIL's (bicubic up, box down) where the extension uses
OpenCV's cubic / area filters; the detected map is then fitted as the extension's `detectmap_proc` fits it
(`pipelines.controlnet.map_fit`).
"""

from __future__ import annotations

import math

# The preprocessors whose sd-webui-controlnet counterpart runs at the preprocessor resolution.
RESOLUTION_PREPROCESSORS = frozenset({"canny", "threshold", "blur_gaussian", "depth_midas", "depth_anything",
                                      "lineart_standard", "scribble_xdog"})
DEFAULT_PROCESSOR_RES = 512  # the extension's slider default, used for an API unit's processor_res -1
PROCESSOR_RES_RANGE = (64, 2048)  # the extension's slider range
PAD_MULTIPLE = 64


def uses_resolution(preprocessor: str) -> bool:
    return preprocessor in RESOLUTION_PREPROCESSORS


def pixel_perfect_resolution(image_size: tuple[int, int], width: int, height: int, resize_mode: str) -> int:
    """The extension's pixel-perfect resolution for a picture of `image_size` used at width x height: the short side
    the picture has once fitted ("resize and fill": the smaller factor) or covering (otherwise: the larger)."""
    raw_width, raw_height = image_size
    factors = (height / raw_height, width / raw_width)
    factor = min(factors) if resize_mode == "resize and fill" else max(factors)
    return round(factor * min(raw_width, raw_height))  # np.round in the extension: half to even, as round()


def unit_resolution(unit, image_size: tuple[int, int], width: int, height: int, resize_mode: str) -> int | None:
    """The resolution the unit's preprocessor runs at, or None to preprocess the picture at the generation size."""
    if not uses_resolution(unit.preprocessor):
        return None
    if unit.pixel_perfect:
        return pixel_perfect_resolution(image_size, width, height, resize_mode)
    return unit.processor_res


def detect_at_resolution(preprocessor, image, resolution: int):
    """`preprocessor(picture)` run as the extension runs it at `resolution`: the picture scaled to that short side
    (sides rounded), edge-padded to multiples of 64, detected, and the padding cut off the map."""
    import numpy as np
    from PIL import Image

    factor = resolution / min(image.size)
    size = (round(image.width * factor), round(image.height * factor))
    scaled = image.resize(size, Image.Resampling.BICUBIC if factor > 1 else Image.Resampling.BOX)
    pixels = np.asarray(scaled)
    pad = [(0, _padding(size[1])), (0, _padding(size[0])), (0, 0)]
    padded = Image.fromarray(np.pad(pixels, pad, mode="edge"))
    return preprocessor(padded).crop((0, 0, *size))


def _padding(length: int) -> int:
    return math.ceil(length / PAD_MULTIPLE) * PAD_MULTIPLE - length
