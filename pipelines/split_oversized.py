"""A1111's "Split oversized images" Extras step: a picture much taller (or wider) than the target cut into crops.

The rule is A1111's preprocess split (modules/textual_inversion/preprocess.py, kept by
scripts/postprocessing_split_oversized.py): the image is resized so its short axis matches the target's (its long
axis floored, `from_h * to_w // from_w`), then cut along the long axis into
`ceil((h - to_h * overlap) / (to_h * (1 - overlap)))` crops of the target size, spread evenly from one end to the other
(`int(i * (h - to_h) / (count - 1))`). An image is split when its aspect ratio against the target's,
`ratio = min / max` of the two orders, is below 1 and at most `threshold`.

Why not A1111 1.6+'s own check: it returns early on `ratio >= 1 and ratio > threshold`, which splits every image whose
ratio is below 1 however close to 1 and ignores the Threshold slider; the threshold is honoured here as the original
preprocess (and the slider's label) intends. A ratio of exactly 1 with threshold 1 gives one crop, where A1111
divides by zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_SPLIT_THRESHOLD = 0.5  # A1111's "Threshold" slider
DEFAULT_OVERLAP_RATIO = 0.2  # A1111's "Overlap ratio" slider
MAX_OVERLAP_RATIO = 0.9  # the slider's maximum; at 1 the crops would never advance


@dataclass(frozen=True)
class SplitPlan:
    """How one image is split: the size it is resized to first, then the crop boxes (left, top, right, bottom)."""

    resized: tuple[int, int]
    boxes: tuple[tuple[int, int, int, int], ...]


def check_split_settings(threshold: float, overlap_ratio: float) -> tuple[float, float]:
    """The two sliders' values, checked: threshold in [0, 1], overlap ratio in [0, 0.9]; ValueError naming them."""
    for name, value, high in (("split_threshold", threshold, 1.0), ("overlap_ratio", overlap_ratio, MAX_OVERLAP_RATIO)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= high:
            raise ValueError(f"{name} must be a number in [0, {high}] (A1111's slider), got {value!r}.")
    return float(threshold), float(overlap_ratio)


def split_plan(width: int, height: int, target_width: int, target_height: int, threshold: float = DEFAULT_SPLIT_THRESHOLD,
               overlap_ratio: float = DEFAULT_OVERLAP_RATIO) -> SplitPlan | None:
    """Where a width x height image is cut for a target_width x target_height target, or None when it is not split;
    ValueError when the resized picture would be over the Extras pixel budget."""
    if height > width:  # portrait: resized to the target's width, cut top to bottom
        ratio = (width * target_height) / (height * target_width)
        inverse_xy = False
    else:  # landscape (or square): resized to the target's height, cut left to right
        ratio = (height * target_width) / (width * target_height)
        inverse_xy = True
    if ratio >= 1.0 or ratio > threshold:
        return None
    from_w, from_h, to_w, to_h = (height, width, target_height, target_width) if inverse_xy else \
        (width, height, target_width, target_height)
    long_side = from_h * to_w // from_w
    _check_resized_pixels(width, height, to_w, long_side)
    count = math.ceil((long_side - to_h * overlap_ratio) / (to_h * (1.0 - overlap_ratio)))
    step = (long_side - to_h) / (count - 1) if count > 1 else 0.0
    offsets = [int(step * i) for i in range(max(count, 1))]
    if inverse_xy:
        return SplitPlan((long_side, to_w), tuple((x, 0, x + to_h, to_w) for x in offsets))
    return SplitPlan((to_w, long_side), tuple((0, y, to_w, y + to_h) for y in offsets))


def _check_resized_pixels(width: int, height: int, short_side: int, long_side: int) -> None:
    """ValueError above the pixels an Extras image may have (`UpscaleLimits.max_pixels`): a strip far thinner than the
    target (1 x 4000 for 512 x 512) would be resized to billions of pixels before it is cut (A1111 does, and runs out
    of memory)."""
    from pipelines.upscale import UpscaleLimits

    budget = UpscaleLimits().max_pixels
    if short_side * long_side > budget:
        raise ValueError(f"Split oversized images: a {width}x{height} picture would be resized to {short_side} x "
                         f"{long_side} ({short_side * long_side} pixels, over the {budget} an Extras image may have) "
                         "before it is cut; its aspect ratio is too far from the target's. Crop or resize it first.")


def split_oversized(image, target_width: int, target_height: int, threshold: float = DEFAULT_SPLIT_THRESHOLD,
                    overlap_ratio: float = DEFAULT_OVERLAP_RATIO) -> list:
    """The crops of `image` (PIL) for the target size, in order; `[image]` when it is not split."""
    from PIL import Image

    threshold, overlap_ratio = check_split_settings(threshold, overlap_ratio)
    if target_width < 1 or target_height < 1:
        raise ValueError(f"The split target size must be positive, got {target_width}x{target_height}.")
    plan = split_plan(image.width, image.height, target_width, target_height, threshold, overlap_ratio)
    if plan is None:
        return [image]
    # Pillow's resize default (bicubic), which A1111 calls without naming a filter
    resized = image.resize(plan.resized, Image.Resampling.BICUBIC)
    return [resized.crop(box) for box in plan.boxes]
