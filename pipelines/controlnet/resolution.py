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
# The most pixels a picture may be scaled to for detection. The extension scales the *short* side to the resolution,
# so a picture of extreme aspect ratio (1 x 60,000 pixels, a 240 KB PNG well inside any input cap) asks for a
# 64 x 3,840,000 resize at the lowest resolution and 2048 x 123 million at the highest: minutes of CPU and gigabytes
# of memory for one request, or the whole server killed for lack of memory. 4096 x 4096 is what the largest
# generation size needs (Pixel Perfect at 4096 x 4096), and leaves an 8:1 panorama room at the default 512.
MAX_DETECT_PIXELS = 4096 * 4096


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


def detection_size(image_size: tuple[int, int], resolution: int) -> tuple[int, int]:
    """The size a picture of `image_size` is scaled to for detection at `resolution` (its short side, sides rounded)."""
    factor = resolution / min(image_size)
    return round(image_size[0] * factor), round(image_size[1] * factor)


def check_detection_size(image_size: tuple[int, int], resolution: int) -> None:
    """Raise ValueError when detecting a picture of `image_size` at `resolution` would scale it beyond
    MAX_DETECT_PIXELS; checked before anything is resized."""
    width, height = detection_size(image_size, resolution)
    if width * height > MAX_DETECT_PIXELS:
        raise ValueError(f"The ControlNet picture is {image_size[0]}x{image_size[1]}; detecting it at resolution "
                         f"{resolution} scales its short side to {resolution}, making it {width}x{height} = "
                         f"{width * height:,} pixels, above the {MAX_DETECT_PIXELS:,}-pixel limit for detection. Crop "
                         "the picture to a less extreme aspect ratio, or lower the preprocessor resolution.")


def detect_at_resolution(preprocessor, image, resolution: int):
    """`preprocessor(picture)` run as the extension runs it at `resolution`: the picture scaled to that short side
    (sides rounded), edge-padded to multiples of 64, detected, and the padding cut off the map."""
    import numpy as np
    from PIL import Image

    check_detection_size(image.size, resolution)
    factor = resolution / min(image.size)
    size = detection_size(image.size, resolution)
    scaled = image.resize(size, Image.Resampling.BICUBIC if factor > 1 else Image.Resampling.BOX)
    pixels = np.asarray(scaled)
    pad = [(0, _padding(size[1])), (0, _padding(size[0])), (0, 0)]
    padded = Image.fromarray(np.pad(pixels, pad, mode="edge"))
    return preprocessor(padded).crop((0, 0, *size))


def _padding(length: int) -> int:
    return math.ceil(length / PAD_MULTIPLE) * PAD_MULTIPLE - length
