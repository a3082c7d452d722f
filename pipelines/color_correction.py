"""A1111's img2img colour correction: pull a result's colours back to its init image's.

A1111's Settings > img2img "Apply color correction to img2img results to match original colors"
(`img2img_color_correction`, off by default; `modules/processing.py` `setup_color_correction` /
`apply_color_correction`) does, per image:

1. the target: the init image as the model saw it (resized, cropped for "only masked", masked area filled), in
   OpenCV's 8-bit CIELAB (`cv2.COLOR_RGB2LAB` on uint8: L scaled to 0..255, a and b offset by 128);
2. the result in the same 8-bit LAB, each channel's histogram matched to the target's channel
   (scikit-image's `exposure.match_histograms(..., channel_axis=2)`), back to RGB with `cv2.COLOR_LAB2RGB`;
3. a "luminosity" blend (the `blendmodes` package's `BlendType.LUMINOSITY`): the matched image's hue and
   saturation with the result's own luminosity, so the correction moves colour but keeps the result's light.

A1111 itself uses OpenCV's LAB (not scikit-image's float `rgb2lab`), so this does too: the same 8-bit rounding.
scikit-image and blendmodes are not dependencies; their two steps are restated here in numpy (see
`match_cumulative_cdf` and `luminosity_blend`), tested against hand-computed values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# blendmodes' `_lum`: ITU-R BT.601 luma weights on [0, 1] RGB (their float sum is 0.9999999999999999, which the
# clip step below relies on being exactly what blendmodes computes)
LUMA_WEIGHTS = (0.299, 0.587, 0.114)


def check_color_correction(value: Any, name: str = "color_correction"):
    """`Img2ImgParams.color_correction` checked: False (off), True (each result matched to its own init image, as
    A1111's setting) or a PIL image (every result matched to that image, as Loopback's first init image)."""
    from PIL import Image

    if isinstance(value, bool) or isinstance(value, Image.Image):
        if isinstance(value, Image.Image) and (value.width < 1 or value.height < 1):
            raise ValueError(f"{name} is an empty {value.width}x{value.height} image; give an image with pixels, or "
                             "True to match each result to its own init image.")
        return value
    raise TypeError(f"{name} must be False, True (match each result to its init image) or a PIL image to match the "
                    f"results to, got {type(value).__name__}.")


def _cv2():
    try:
        import cv2
    except ImportError as error:  # pragma: no cover - opencv-python-headless is a mixkit dependency
        raise ImportError("Colour correction converts to LAB with OpenCV: install opencv-python-headless.") from error
    return cv2


def color_correction_target(image) -> np.ndarray:
    """A1111's `setup_color_correction`: a PIL image (flattened to RGB) as OpenCV 8-bit LAB, [H, W, 3] uint8."""
    rgb = np.asarray(image.convert("RGB"), dtype=np.uint8)
    return _cv2().cvtColor(rgb, _cv2().COLOR_RGB2LAB)


def match_cumulative_cdf(source: np.ndarray, template: np.ndarray) -> np.ndarray:
    """scikit-image's `_match_cumulative_cdf`: each distinct source value goes to the template value at the same
    quantile, linearly interpolated (`np.interp`) between the template's distinct values.

    A value's quantile is the share of pixels at or below it (the cumulative count over the array's size), for both
    arrays; source quantiles below the template's first one take the template's smallest value (np.interp holds
    the end values). Returns float64 of the source's shape."""
    source_values, source_index, source_counts = np.unique(source.reshape(-1), return_inverse=True,
                                                           return_counts=True)
    template_values, template_counts = np.unique(template.reshape(-1), return_counts=True)
    source_quantiles = np.cumsum(source_counts) / source.size
    template_quantiles = np.cumsum(template_counts) / template.size
    matched_values = np.interp(source_quantiles, template_quantiles, template_values)
    return matched_values[source_index].reshape(source.shape)


def match_histograms(image: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """scikit-image's `match_histograms(image, reference, channel_axis=2)` for [H, W, C] arrays of any sizes: each
    channel matched on its own, written into an array of the image's dtype. For uint8 that truncates the
    interpolated values toward zero (numpy's float->int assignment), as scikit-image's channel loop does."""
    if image.ndim != 3 or reference.ndim != 3 or image.shape[-1] != reference.shape[-1]:
        raise ValueError(f"match_histograms needs two [H, W, C] arrays with the same C, got {image.shape} and "
                         f"{reference.shape}.")
    matched = np.empty(image.shape, dtype=image.dtype)
    for channel in range(image.shape[-1]):
        matched[..., channel] = match_cumulative_cdf(image[..., channel], reference[..., channel])
    return matched


def _luma(colours: np.ndarray) -> np.ndarray:
    return colours[..., 0] * LUMA_WEIGHTS[0] + colours[..., 1] * LUMA_WEIGHTS[1] + colours[..., 2] * LUMA_WEIGHTS[2]


def luminosity_blend(background: np.ndarray, foreground: np.ndarray) -> np.ndarray:
    """blendmodes' LUMINOSITY (`_setLum(background, _lum(foreground))`) on float RGB [H, W, 3] in [0, 1].

    Every channel of the background is shifted by the luminosity difference; a pixel then out of [0, 1] is pulled
    toward its new luminosity L: below 0, c = L + (c - L) * L / (L - min); above 1 (blendmodes tests the maximum
    from before that first step), c = L + (c - L) * (1 - L) / (max - L), with L recomputed after the shift. The
    result is not clipped here (blendmodes clips when converting to 8 bits)."""
    colours = background + (_luma(foreground) - _luma(background))[..., None]
    luma = _luma(colours)[..., None]
    low = colours.min(axis=-1, keepdims=True)
    high = colours.max(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        # A zero denominator needs equal channels at L, which the shift never gives a pixel out of range; where it
        # would, the colour is kept instead of blendmodes' NaN (a black pixel after its uint8 cast).
        below = np.where(luma - low != 0, luma + (colours - luma) * luma / (luma - low), colours)
        colours = np.where(low < 0, below, colours)
        above = np.where(high - luma != 0, luma + (colours - luma) * (1 - luma) / (high - luma), colours)
        colours = np.where(high > 1, above, colours)
    return colours


def to_8bit(colours: np.ndarray) -> np.ndarray:
    """blendmodes' `imageFloatToInt` after its clip: [0, 1] floats to uint8 by round-half-to-even of x * 255."""
    return np.clip(np.round(np.clip(colours, 0.0, 1.0) * 255), 0, 255).astype(np.uint8)


def apply_color_correction(target: np.ndarray, image):
    """A1111's `apply_color_correction(correction, original_image)`: `image` (PIL) with its LAB histograms matched
    to `target` (`color_correction_target`), luminosity-blended under `image`; returns a new RGB PIL image."""
    from PIL import Image

    cv2 = _cv2()
    rgb = np.asarray(image.convert("RGB"), dtype=np.uint8)
    matched_lab = match_histograms(cv2.cvtColor(rgb, cv2.COLOR_RGB2LAB), target)
    matched_rgb = cv2.cvtColor(matched_lab, cv2.COLOR_LAB2RGB)
    blended = luminosity_blend(matched_rgb / 255, rgb / 255)
    return Image.fromarray(to_8bit(blended), "RGB")
