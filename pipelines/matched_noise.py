"""Noise shaped like a picture: what "Outpainting mk2" puts in the new area before its inpainting pass.

An empty (black or flat) border gives the sampler nothing to continue, so at the denoising strengths outpainting
needs it paints a flat, unrelated band. The fill here is noise that shares the visible picture's frequency content
and its colour distribution, so the border starts as a plausible continuation of the picture's texture and tones.
The algorithm is g-diffuser's (parlance-zz), as A1111's scripts/outpainting_mk_2.py uses it, written anew:

1. the visible picture, its hidden part set to its mean colour, is taken to frequency space (orthonormal 2-D FFT
   per channel): its magnitude says how much of each frequency the picture has, its phase where it is;
2. seeded uniform noise, mostly grey (`color_variation` of it keeps its own colour), is low-passed by the window
   1 / ((1 + x²)(1 + y²)) over the normalised frequencies;
3. the fill's spectrum is that noise's power times the picture's magnitude to the `falloff_exponent`, with the
   picture's phase (lower exponents flatten the picture's fall-off: finer detail);
4. back in pixel space, each channel of the fill is mapped by rank onto the visible pixels' values of that channel
   (empirical quantile mapping), so the new area has the picture's colour statistics exactly.

Differences from A1111, each on purpose: the hidden area is set to the mean of the visible pixels (A1111 averages
the whole canvas, its black border included, which darkens the spectrum's zero frequency); the histogram is matched
by rank (A1111 needs scikit-image, which mixkit does not depend on; with as many filled as visible pixels the fill's
values are exactly the visible ones); the window is built on `numpy.fft.fftfreq`'s layout instead of shifting the
spectra around it; and pixels where the mask is 0 are returned bit-identical (A1111 truncates after float
arithmetic, which can lower a kept pixel by one level).
"""

from __future__ import annotations

from typing import Any

import numpy as np

MAX_FALLOFF_EXPONENT = 4.0  # A1111's "Fall-off exponent (lower=higher detail)" slider: 0 .. 4, default 1
MAX_COLOR_VARIATION = 1.0  # A1111's "Color variation" slider: 0 .. 1, default 0.05


def check_fill_settings(falloff_exponent: Any, color_variation: Any) -> None:
    """ValueError naming the setting when the fall-off exponent or colour variation is outside A1111's sliders."""
    for name, value, high in (("falloff_exponent", falloff_exponent, MAX_FALLOFF_EXPONENT),
                              ("color_variation", color_variation, MAX_COLOR_VARIATION)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= high:
            raise ValueError(f"{name} must be a number in [0, {high:g}] (A1111's Outpainting mk2 slider), "
                             f"got {value!r}.")


def matched_noise_fill(image, mask, *, falloff_exponent: float = 1.0, color_variation: float = 0.05,
                       seed: int = 0):
    """`image` (RGB) with its masked part replaced by noise matched to the unmasked part's spectrum and colours.

    `mask` is an "L" image of the same size, white (any value above 0) where to fill and black (0) where the picture
    is kept; soft values blend fill and picture as A1111 blends them. The result is a new RGB image of the same size,
    the same for the same inputs and `seed` (A1111 always uses seed 0), bit-identical to `image` where the mask is 0.
    """
    from PIL import Image

    if not isinstance(image, Image.Image) or not isinstance(mask, Image.Image):
        raise TypeError(f"image and mask must be PIL images, got {type(image).__name__} and {type(mask).__name__}.")
    if image.size != mask.size:
        raise ValueError(f"mask is {mask.width}x{mask.height} but image is {image.width}x{image.height}; give a "
                         "mask of the image's size.")
    check_fill_settings(falloff_exponent, color_variation)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}.")
    pixels = np.asarray(image.convert("RGB"))
    weight = np.asarray(mask.convert("L")).astype(np.float64) / 255.0
    filled, visible = weight > 0, weight == 0
    if not filled.any():
        return image.convert("RGB").copy()
    if not visible.any():
        raise ValueError("The mask covers the whole image: there is no visible picture to match the noise to; leave "
                         "part of the mask black.")
    source = pixels.astype(np.float64) / 255.0
    noise = _shaped_noise(source, weight, visible, float(falloff_exponent), float(color_variation), seed)
    for channel in range(3):
        noise[filled, channel] = _match_by_rank(noise[filled, channel], source[visible, channel])
    blended = source * (1.0 - weight[..., None]) + noise * weight[..., None]
    out = np.clip(np.rint(blended * 255.0), 0, 255).astype(np.uint8)
    out[visible] = pixels[visible]
    return Image.fromarray(out, "RGB")


def _shaped_noise(source: np.ndarray, weight: np.ndarray, visible: np.ndarray, falloff_exponent: float,
                  color_variation: float, seed: int) -> np.ndarray:
    """Steps 1-3 of the module docstring: (H, W, 3) real noise with the visible picture's spectrum and phase."""
    height, width = weight.shape
    shown = source * (1.0 - weight[..., None])
    peak = shown.max()
    if peak > 0:  # A1111 scales the visible picture to a peak of 1 before adding the mean colour
        shown = shown / peak
    shown = shown + source[visible].mean() * weight[..., None]
    spectrum = np.fft.fft2(shown, axes=(0, 1), norm="ortho")
    magnitude = np.abs(spectrum)
    phase = np.divide(spectrum, magnitude, out=np.ones_like(spectrum), where=magnitude > 0)

    rng = np.random.default_rng(seed)
    noise = rng.random((height, width, 3))
    grey = noise.mean(axis=2, keepdims=True)
    noise = color_variation * noise + (1.0 - color_variation) * grey
    noise_power = np.abs(np.fft.fft2(noise, axes=(0, 1), norm="ortho") * _low_pass(height, width)[..., None]) ** 2
    shaped = noise_power * magnitude ** falloff_exponent * phase
    return np.real(np.fft.ifft2(shaped, axes=(0, 1), norm="ortho"))


def _low_pass(height: int, width: int) -> np.ndarray:
    """1 / ((1 + x²)(1 + y²)) over frequencies normalised to [-1, 1) on the shorter side (A1111's window mode 1),
    laid out as `numpy.fft.fft2` orders its output (zero frequency first)."""
    shorter = min(height, width)
    y = 2.0 * np.fft.fftfreq(height) * height / shorter
    x = 2.0 * np.fft.fftfreq(width) * width / shorter
    return 1.0 / np.outer(1.0 + y ** 2, 1.0 + x ** 2)


def _match_by_rank(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """`values` replaced by the `reference` distribution's quantiles at their ranks: the smallest becomes the
    reference's minimum, the largest its maximum, and the rest are interpolated in the sorted reference."""
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[np.argsort(values, kind="stable")] = np.arange(values.size)
    positions = ranks * (reference.size - 1) / max(values.size - 1, 1)
    return np.interp(positions, np.arange(reference.size), np.sort(reference))
