"""A1111's Soft inpainting (its built-in `soft-inpainting` extension): settings and the math, as pure functions.

Soft inpainting treats the blurred mask as an opacity rather than rounding it. During sampling the original latents
are blended into the model's denoised estimate (the model input, for the timestep samplers) with a per-cell weight
`repaint ** (sigma ** schedule_bias * preservation_strength)`: a half-masked cell keeps more of the original while the
noise is high. The blend interpolates the vectors linearly but their lengths as a power mean (the "transition contrast
boost"), because a linear mix of two latent vectors is shorter than either and decodes washed out. The last blend is
skipped; the result is instead composited in pixel space through a mask built from how far each latent cell moved
from the original (`difference_masks`), biased by the mask ("mask influence").
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

# (field, A1111's infotext key, UI label, low, high, UI step), in A1111's slider / `script_args` order
SOFT_INPAINTING_FIELDS = (
    ("mask_blend_power", "Soft inpainting schedule bias", "Schedule bias", 0.0, 8.0, 0.1),
    ("mask_blend_scale", "Soft inpainting preservation strength", "Preservation strength", 0.0, 8.0, 0.05),
    ("inpaint_detail_preservation", "Soft inpainting transition contrast boost", "Transition contrast boost",
     1.0, 32.0, 0.5),
    ("composite_mask_influence", "Soft inpainting mask influence", "Mask influence", 0.0, 1.0, 0.05),
    ("composite_difference_threshold", "Soft inpainting difference threshold", "Difference threshold", 0.0, 8.0, 0.25),
    ("composite_difference_contrast", "Soft inpainting difference contrast", "Difference contrast", 0.0, 8.0, 0.25),
)
ENABLED_INFOTEXT_KEY = "Soft inpainting enabled"

# A1111's `get_gaussian_kernel(stddev_radius=1.5, max_radius=2)` and the two histogram windows of
# `apply_adaptive_masks`: a near-maximum (top 10%) then a median-like mean (25-75%) over a 5x5 neighbourhood
DIFFERENCE_KERNEL_STDDEV, DIFFERENCE_KERNEL_RADIUS = 1.5, 2
DIFFERENCE_FILTER_WINDOWS = ((0.9, 1.0), (0.25, 0.75))


@dataclass(frozen=True)
class SoftInpainting:
    """Soft inpainting's six settings, named and defaulted as A1111's `SoftInpaintingSettings`; ranges are its
    sliders' (`check_soft_inpainting`)."""

    mask_blend_power: float = 1.0  # "Schedule bias": > 1 preserves more early (high sigma), < 1 more late
    mask_blend_scale: float = 0.5  # "Preservation strength": how strongly partly masked cells keep the original
    inpaint_detail_preservation: float = 4.0  # "Transition contrast boost": the power of the length mean
    composite_mask_influence: float = 0.0  # "Mask influence": 0 = difference only, 1 = follow the mask
    composite_difference_threshold: float = 0.5  # "Difference threshold": latent distance where the original is 50%
    composite_difference_contrast: float = 2.0  # "Difference contrast": sharpness of that transition

    def infotext(self) -> dict[str, Any]:
        """A1111's infotext keys, in its order (`add_generation_params`)."""
        return {ENABLED_INFOTEXT_KEY: True,
                **{key: getattr(self, name) for name, key, *_ in SOFT_INPAINTING_FIELDS}}

    @classmethod
    def from_args(cls, args) -> "SoftInpainting":
        """From A1111's script args after `enabled`: power, scale, detail, influence, threshold, contrast."""
        return check_soft_inpainting(cls(*args))


def check_soft_inpainting(value: Any) -> SoftInpainting | None:
    """`value` (None or a SoftInpainting) with every setting a finite real number in A1111's slider range, as a float;
    raises ValueError/TypeError naming the setting, its value and the range."""
    if value is None:
        return None
    if not isinstance(value, SoftInpainting):
        raise TypeError(f"soft_inpainting must be a SoftInpainting or None, got {type(value).__name__}.")
    checked = {}
    for name, key, label, low, high, _ in SOFT_INPAINTING_FIELDS:
        number = getattr(value, name)
        # the range first: it refuses NaN and infinities, and math.isfinite raises OverflowError on a huge int
        if isinstance(number, bool) or not isinstance(number, numbers.Real) or not low <= number <= high:
            raise ValueError(f"soft_inpainting.{name} ({label}) must be a number in [{low:g}, {high:g}], "
                             f"got {number!r}.")
        checked[name] = float(str(number)) if type(number).__module__ == "numpy" else float(number)
    return SoftInpainting(**checked)


def schedule_weight(repaint, sigma: float, settings: SoftInpainting):
    """How much of the denoised latents a cell takes at noise level `sigma` (A1111's `get_modified_nmask`):
    `repaint ** (sigma ** power * scale)`. Fully repainted cells (1) take all of it and unmasked ones (0) none,
    unless the exponent is 0 (scale 0), where every cell takes all of it (0 ** 0 = 1, as torch.pow gives)."""
    import torch

    return torch.pow(repaint, (sigma ** settings.mask_blend_power) * settings.mask_blend_scale)


def norm_preserving_blend(original, current, weight, detail_preservation: float):
    """`original` and `current` ([B, C, h, w]) mixed by `weight` ([B or 1, 1, h, w], 1 = current) with the direction of
    their linear mix but the length `((1 - w) |a|^p + w |b|^p) ^ (1 / p)`, p = detail_preservation (A1111's
    `latent_blend`). Lengths are taken over channels, in float64 (large p), plus 1e-5 against a zero vector."""
    import torch

    mixed = original * (1 - weight) + current * weight
    p = detail_preservation
    length = torch.linalg.vector_norm(mixed, dim=1, keepdim=True).double() + 0.00001
    wanted = (torch.linalg.vector_norm(original, dim=1, keepdim=True).double().pow(p) * (1 - weight.double())
              + torch.linalg.vector_norm(current, dim=1, keepdim=True).double().pow(p) * weight.double()).pow(1 / p)
    return mixed * (wanted / length).to(mixed.dtype)


def gaussian_kernel(stddev: float = DIFFERENCE_KERNEL_STDDEV, radius: int = DIFFERENCE_KERNEL_RADIUS):
    """A (2r+1)^2 Gaussian, 1 at the centre, shifted and rescaled to reach 0 one cell beyond `radius` (A1111's
    `get_gaussian_kernel`), as a float64 tensor."""
    import torch

    def gaussian(square):
        return math.exp(-square / (stddev * stddev))

    zero = gaussian((radius + 1.0) ** 2)
    offsets = torch.arange(-radius, radius + 1, dtype=torch.float64)
    square = offsets[:, None] ** 2 + offsets[None, :] ** 2
    return ((torch.exp(-square / (stddev * stddev)) - zero) / (1 - zero)).clamp(min=0.0)


def weighted_histogram_filter(image, kernel, low: float, high: float, min_width: float = 1.0):
    """Each cell of `image` ([B, h, w]) replaced by the weighted mean of the part [low, high] (fractions of the total
    weight) of its neighbourhood's values stacked in sorted order, each value `kernel` weight thick (A1111's
    `weighted_histogram_filter`): low=0.9, high=1 is a soft maximum, 0.25-0.75 a soft median. Cells beyond the edge
    do not count; a window thinner than `min_width` is widened to it around its centre, kept inside the stack."""
    import torch
    import torch.nn.functional as F

    size = kernel.shape[0]
    radius = size // 2
    batch, height, width = image.shape
    values = F.unfold(image[:, None].double(), size, padding=radius).view(batch, size * size, height, width)
    inside = F.unfold(torch.ones(1, 1, height, width, dtype=torch.float64, device=image.device), size,
                      padding=radius).view(1, size * size, height, width)
    weights = kernel.to(values).reshape(1, -1, 1, 1) * inside
    values, order = values.sort(dim=1, stable=True)
    weights = torch.gather(weights.expand_as(values), 1, order)
    ends = weights.cumsum(dim=1)
    starts = ends - weights
    total = ends[:, -1:]
    window_min, window_max = total * low, total * high
    narrow = (window_max - window_min) < min_width
    centre = (window_min + window_max) / 2
    wide_min = torch.minimum(centre - min_width / 2, total - min_width).clamp(min=0.0)
    window_min = torch.where(narrow, wide_min, window_min)
    window_max = torch.where(narrow, wide_min + min_width, window_max)
    overlap = (torch.minimum(window_max, ends) - torch.maximum(window_min, starts)).clamp(min=0.0)
    weight = overlap.sum(dim=1)
    mean = (values * overlap).sum(dim=1) / weight.clamp(min=1e-300)
    return torch.where(weight > 0, mean, torch.zeros_like(mean)).to(image.dtype)


def smootherstep(x):
    """Perlin's smootherstep 6x^5 - 15x^4 + 10x^3 on [0, 1]."""
    return x * x * x * (x * (6 * x - 15) + 10)


def difference_masks(original, latents, repaint, settings: SoftInpainting):
    """Per latent cell, how much of the result to keep over the original (1 = result), [B, h, w] in [0, 1], from how
    far the cell moved (`latents` vs `original`, [B, C, h, w]): A1111's `apply_adaptive_masks` before its 8-bit
    image. The distance is filtered (soft max, then soft median), then divided by the threshold, which the mask
    (`repaint`, [B or 1, 1, h, w]) scales by `mask_influence`: towards 0 (always the result) where fully repainted,
    towards infinity (always the original) where not. 0/0 (no change at threshold 0) counts as no change."""
    import torch

    mask = repaint[:, 0].double().clamp(0, 1)
    scalar = 1 - mask ** (settings.mask_blend_scale / 2)
    influence = settings.composite_mask_influence
    scalar = 0.5 * (1 - influence) + scalar * influence
    half_distance = settings.composite_difference_threshold * scalar / (1.00001 - scalar)
    distance = torch.linalg.vector_norm((latents - original).double(), dim=1)
    kernel = gaussian_kernel().to(distance.device)
    for low, high in DIFFERENCE_FILTER_WINDOWS:
        distance = weighted_histogram_filter(distance, kernel, low, high)
    ratio = torch.where(distance == 0, torch.zeros_like(distance), distance / half_distance)
    keep_original = smootherstep(1 / (1 + ratio ** settings.composite_difference_contrast))
    return (1 - keep_original).clamp(0, 1)
