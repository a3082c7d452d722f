"""Line-drawing preprocessors without weights, as sd-webui-controlnet's `lineart_standard` and `scribble_xdog`.

Both are differences of Gaussian blurs of the float picture (the extension's `cv2.GaussianBlur(x, (0, 0), sigma)`),
here in numpy so OpenCV stays optional: OpenCV's kernel for a float image (size round(8 sigma + 1), odd; weights
exp(-d^2 / 2 sigma^2), normalised), applied along rows then columns with its default border (reflect-101).
"""

from __future__ import annotations

import numpy as np

from pipelines.preprocessors.registry import Preprocessor, Slider, register_preprocessor


def gaussian_blur(pixels: np.ndarray, sigma: float) -> np.ndarray:
    """float32 HxWxC blur as OpenCV's `GaussianBlur(pixels, (0, 0), sigma)` on a float32 image."""
    size = int(np.round(sigma * 8 + 1)) | 1
    offsets = np.arange(size, dtype=np.float64) - (size - 1) / 2
    kernel = np.exp(-offsets ** 2 / (2 * sigma ** 2))
    kernel = (kernel / kernel.sum()).astype(np.float32)
    radius = size // 2
    out = pixels.astype(np.float32)
    for axis in (1, 0):
        pad = [(0, 0)] * out.ndim
        pad[axis] = (radius, radius)
        padded = np.pad(out, pad, mode="reflect")  # numpy's "reflect" is OpenCV's BORDER_REFLECT_101
        length = out.shape[axis]
        out = sum(weight * np.take(padded, np.arange(i, i + length), axis=axis) for i, weight in enumerate(kernel))
    return out.astype(np.float32)


def _lineart_standard(image, _a, _b):
    """Dark lines on a light page -> white lines on black: how much darker each pixel is than its sigma-6 blur (the
    smallest over the channels), scaled so the median line pixel (those above 8) becomes 127."""
    from PIL import Image

    x = np.asarray(image).astype(np.float32)
    intensity = np.min(gaussian_blur(x, 6.0) - x, axis=2).clip(0, 255)
    lines = intensity[intensity > 8]
    # The extension divides by max(16, median): with no line pixel its median is NaN and max() keeps the 16.
    intensity = intensity / (max(16.0, float(np.median(lines))) if lines.size else 16.0) * 127
    return Image.fromarray(intensity.clip(0, 255).astype(np.uint8)).convert("RGB")


def _scribble_xdog(image, level, _b):
    """A scribble from the difference of two blurs (sigma 0.5 and 5): white where twice the darkest channel's
    difference exceeds `level` (the extension's "XDoG Threshold")."""
    from PIL import Image

    x = np.asarray(image).astype(np.float32)
    dog = (255 - np.min(gaussian_blur(x, 5.0) - gaussian_blur(x, 0.5), axis=2)).clip(0, 255).astype(np.uint8)
    # The extension doubles in uint8 (`2 * (255 - dog)`), which wraps past 255: the centres of the darkest strokes
    # come out black. Kept, so its scribble ControlNets get the maps they were used with.
    doubled = (2 * (255 - dog.astype(np.int32))) % 256
    scribble = np.where(doubled > level, 255, 0).astype(np.uint8)
    return Image.fromarray(scribble).convert("RGB")


for _entry in (
    Preprocessor("lineart_standard", _lineart_standard),
    Preprocessor("scribble_xdog", _scribble_xdog, threshold_a=Slider("XDoG Threshold", 32, 1, 64)),
):
    register_preprocessor(_entry)
