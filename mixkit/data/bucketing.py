"""Aspect-ratio bucketing (NovelAI's method) with kohya's BucketManager rules.

Instead of center-cropping every image to the training resolution, images are grouped into "buckets" of
similar aspect ratio whose pixel area stays at most the resolution's (side², or kohya's width x height);
every batch is drawn from one bucket, so tensors stack without padding and tall or wide pictures keep
their composition.

The bucket table, the choice of an image's bucket and the size an image is resized to before its
center crop follow kohya-ss/sd-scripts (`make_bucket_resolutions`, `BucketManager.select_bucket`),
so a dataset lands in the same buckets, with the same crops, as in a kohya run, and `ss_bucket_info`
says the same thing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Bucket:
    width: int
    height: int

    @property
    def aspect(self) -> float:
        return self.width / self.height


def resolution_size(resolution) -> tuple[int, int]:
    """(width, height) of a training resolution: one side (a square, `512`) or kohya's width,height (`[512, 768]`,
    its "512,768"). Trusts a value `check_resolution` accepted."""
    if isinstance(resolution, (list, tuple)):
        return int(resolution[0]), int(resolution[1])
    return resolution, resolution


def check_resolution(resolution, name: str = "resolution") -> tuple[int, int]:
    """`resolution_size` of a value a user gave, refusing anything but a positive side or two, each divisible by 8."""
    is_side = isinstance(resolution, int) and not isinstance(resolution, bool)
    pair = isinstance(resolution, (list, tuple)) and len(resolution) == 2
    if not is_side and not (pair and all(isinstance(side, int) and not isinstance(side, bool) for side in resolution)):
        raise ValueError(f"{name} must be one side (512) or [width, height] (kohya's \"512,768\"), got {resolution!r}")
    for side in resolution_size(resolution):
        if side <= 0 or side % 8:
            raise ValueError(f"{name} {resolution!r}: each side must be positive and divisible by 8 (the VAE "
                             f"downsamples by 8); try {max(8, side // 8 * 8)} for {side}")
    return resolution_size(resolution)


def square_side(width: int, height: int, step: int) -> int:
    """The side of kohya's square bucket: the square root of the resolution's area, rounded down to the step (the
    resolution itself for a square one)."""
    return math.isqrt(width * height) // step * step


def check_bucket_inputs(resolution, step: int, min_side: int, max_side: int) -> None:
    """Refuse bucket settings kohya refuses, naming the setting and the way out (they used to be clamped silently).
    `resolution` is one side or (width, height)."""
    width, height = check_resolution(resolution)
    for name, value in (("bucket_step", step), ("min_bucket_reso", min_side), ("max_bucket_reso", max_side)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if step % 8:
        raise ValueError(f"bucket_step must be divisible by 8, got {step}")
    shown = str(width) if width == height else f"{width}x{height}"
    # kohya's DreamBoothDataset asserts min(resolution) >= min_bucket_reso and max(resolution) <= max_bucket_reso.
    if min_side > min(width, height):
        raise ValueError(f"min_bucket_reso={min_side} is above resolution={shown}; kohya refuses this too (it requires "
                         "min_bucket_reso <= each side of the resolution: a bucket holds at most the resolution's "
                         f"area). Lower min_bucket_reso to {min(width, height)} or less, or raise resolution.")
    if max_side < max(width, height):
        raise ValueError(f"max_bucket_reso={max_side} is below resolution={shown}; kohya refuses this too (the "
                         f"resolution's own {width}x{height} would not fit). Raise max_bucket_reso to "
                         f"{max(width, height)} or more, or lower resolution.")
    side = math.isqrt(width * height)
    if square_side(width, height, step) == 0:
        # kohya's square bucket would be 0x0 (the side of the resolution's area rounded down to the step) and fail at
        # its first division.
        raise ValueError(f"bucket_step={step} is above resolution={shown}: no bucket side on that step fits in a "
                         f"square of its area ({side}x{side}). Lower bucket_step to {side // 8 * 8} or less (a "
                         "multiple of 8), or raise resolution.")


def make_buckets(resolution, *, step: int = 64, min_side: int = 256, max_side: int = 1024) -> list[Bucket]:
    """kohya's `make_bucket_resolutions`: for a resolution of area A (one side s: s², or width x height), the square
    of side sqrt(A) rounded down to the step, and for every width on the step from `min_side` up to `max_side` the
    tallest step height with area <= A (capped at `max_side`, kept when >= `min_side`), both ways round; sorted by
    (width, height) as kohya sorts them, which is the order `assign_bucket` breaks ties in. A 512x768 resolution thus
    buckets like a square one of the same area (about 627²), portrait and landscape alike, as kohya's does."""
    check_bucket_inputs(resolution, step, min_side, max_side)
    width, height = resolution_size(resolution)
    max_area = width * height
    square = square_side(width, height, step)
    buckets = {Bucket(square, square)}
    # kohya starts at min_bucket_reso itself; rounded up to the step here so every side stays on the step (kohya's
    # newer trainers round min_bucket_reso to the step too).
    width = (min_side + step - 1) // step * step
    while width <= max_side:
        height = min(max_side, (max_area // width) // step * step)
        if height >= min_side:
            buckets.add(Bucket(width, height))
            buckets.add(Bucket(height, width))
        width += step
    return sorted(buckets)


def _check_image_size(width: int, height: int) -> None:
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")


def assign_bucket(width: int, height: int, buckets: list[Bucket]) -> Bucket:
    """kohya's `select_bucket` over predefined buckets: a bucket of exactly the image's size if there is one, else
    the one whose aspect ratio (width / height) is nearest in plain difference, the first in `buckets`' order on a
    tie (numpy's `argmin`). mixkit once compared log aspect ratios, which put about 3% of image sizes in another
    bucket than kohya's."""
    _check_image_size(width, height)
    exact = Bucket(width, height)
    if exact in buckets:
        return exact
    aspect = width / height
    return min(buckets, key=lambda bucket: abs(bucket.aspect - aspect))  # min keeps the first of equal keys


def cover_size(width: int, height: int, bucket: Bucket) -> tuple[int, int]:
    """The size kohya resizes an image to before center-cropping it to a predefined bucket: scaled so that it covers
    the bucket, matching the bucket's height when the image is wider than the bucket, else its width; each side
    rounded half up."""
    _check_image_size(width, height)
    scale = bucket.height / height if width / height > bucket.aspect else bucket.width / width
    return int(width * scale + 0.5), int(height * scale + 0.5)


class NoBucketError(ValueError):
    """bucket_no_upscale with an image whose side is below the bucket step: it has no bucket it would not be
    enlarged into. `side` is that image's shorter side as it would be bucketed (after any scaling down)."""

    def __init__(self, message: str, side: int) -> None:
        super().__init__(message)
        self.side = side


def _round_to_step(value: float, step: int) -> int:
    """kohya's `round_to_steps`: rounded half up to an integer, then down to a multiple of `step`."""
    rounded = int(value + 0.5)
    return rounded - rounded % step


def no_upscale_size(width: int, height: int, resolution, step: int) -> tuple[int, int]:
    """The size kohya's bucket_no_upscale resizes an image to (`select_bucket`'s no-upscale branch); the image's
    bucket is that size rounded down to the step, so at most step - 1 pixels a side are cropped.

    `resolution` is one side or (width, height); its area A is the limit. An image of area up to A keeps its size. A
    larger one is scaled to area A at its aspect
    ratio; one side is rounded to the step and the other follows the aspect ratio, choosing the side whose rounding
    changes the aspect ratio less (on a tie, the height). A 4000x3000 photo at 512 becomes 512x384 and is not
    cropped at all. A candidate whose other side rounds to 0 (kohya divides by it and fails) is never chosen."""
    _check_image_size(width, height)
    max_area = math.prod(resolution_size(resolution))
    if width * height <= max_area:
        return width, height
    aspect = width / height
    fit_width = math.sqrt(max_area * aspect)
    fit_height = max_area / fit_width
    by_width = _round_to_step(fit_width, step)
    height_by_width = _round_to_step(by_width / aspect, step)
    by_height = _round_to_step(fit_height, step)
    width_by_height = _round_to_step(by_height * aspect, step)
    error_by_width = abs(by_width / height_by_width - aspect) if height_by_width else math.inf
    error_by_height = abs(width_by_height / by_height - aspect) if by_height else math.inf
    if error_by_width < error_by_height:
        return by_width, int(by_width / aspect + 0.5)
    return int(by_height * aspect + 0.5), by_height


def no_upscale_bucket(width: int, height: int, resolution, step: int) -> Bucket:
    """An image's own bucket (kohya's bucket_no_upscale): its `no_upscale_size` rounded down to multiples of `step`,
    so the image is only ever shrunk, and cropped by under a step.

    A side below `step` rounds down to nothing: kohya's BucketManager then makes a bucket of width or height 0 and
    fails at its first division; here it is a `NoBucketError` naming the sizes. (Rounding such a side *up* to one
    step, as mixkit once did, enlarges the image, which bucket_no_upscale promises never to do.)"""
    resized = no_upscale_size(width, height, resolution, step)
    if min(resized) < step:
        fit_width, fit_height = resolution_size(resolution)
        scale = min(1.0, math.sqrt(fit_width * fit_height / (width * height)))
        fitted = (int(width * scale), int(height * scale))
        scaled = f", {fitted[0]}x{fitted[1]} once scaled down to fit {fit_width}x{fit_height}," if scale < 1 else ""
        raise NoBucketError(f"{width}x{height} pixels{scaled} has a side below the bucket step {step}", min(fitted))
    return Bucket(resized[0] - resized[0] % step, resized[1] - resized[1] % step)
