"""Aspect-ratio bucketing (NovelAI's method, as in kohya's trainer).

Instead of center-cropping every image to a square, images are grouped into "buckets" of similar
aspect ratio whose pixel area stays at most resolution²; every batch is drawn from one bucket, so
tensors stack without padding and tall or wide pictures keep their composition.
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


def check_bucket_inputs(resolution: int, step: int, min_side: int, max_side: int) -> None:
    for name, value in (("resolution", resolution), ("bucket step", step), ("min side", min_side), ("max side", max_side)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if resolution % 8:
        raise ValueError(f"resolution must be divisible by 8 (the VAE downsamples by 8), got {resolution}; try {resolution // 8 * 8 or 8}")
    if step % 8:
        raise ValueError(f"bucket step must be divisible by 8, got {step}")
    if not min_side <= resolution <= max_side:
        raise ValueError(f"need min side <= resolution <= max side, got {min_side} <= {resolution} <= {max_side}")


def make_buckets(resolution: int, *, step: int = 64, min_side: int = 256, max_side: int = 1024) -> list[Bucket]:
    """All (width, height) multiples of `step` within [min_side, max_side] with area <= resolution², widest sides maximal."""
    check_bucket_inputs(resolution, step, min_side, max_side)
    max_area = resolution * resolution
    buckets = {Bucket(resolution, resolution)}
    width = (min_side + step - 1) // step * step
    while width <= max_side:
        height = min(max_side, (max_area // width) // step * step)
        if height >= min_side:
            buckets.add(Bucket(width, height))
            buckets.add(Bucket(height, width))
        width += step
    return sorted(buckets)


class NoBucketError(ValueError):
    """bucket_no_upscale with an image whose side is below the bucket step: it has no bucket it would not be
    enlarged into. `side` is that image's shorter side as it would be bucketed (after any scaling down)."""

    def __init__(self, message: str, side: int) -> None:
        super().__init__(message)
        self.side = side


def no_upscale_bucket(width: int, height: int, resolution: int, step: int) -> Bucket:
    """An image's own bucket (kohya's bucket_no_upscale): its size rounded down to multiples of `step`, after
    scaling down to an area of resolution² if larger, so the image is only ever shrunk or cropped by under a step.

    A side below `step` (after that scaling) rounds down to nothing: kohya's BucketManager then makes a bucket
    of width or height 0 and fails at its first division; here it is a `NoBucketError` naming the sizes. (Rounding
    such a side *up* to one step, as mixkit once did, enlarges the image, which bucket_no_upscale promises never
    to do.)"""
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    scale = min(1.0, math.sqrt(resolution * resolution / (width * height)))
    fitted = (int(width * scale), int(height * scale))
    if min(fitted) < step:
        scaled = f", {fitted[0]}x{fitted[1]} once scaled down to fit {resolution}x{resolution}," if scale < 1 else ""
        raise NoBucketError(f"{width}x{height} pixels{scaled} has a side below the bucket step {step}", min(fitted))
    return Bucket(fitted[0] // step * step, fitted[1] // step * step)


def assign_bucket(width: int, height: int, buckets: list[Bucket]) -> Bucket:
    """The bucket whose aspect ratio is closest to the image's, in log space (2:1 is as far from 1:1 as 1:2)."""
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    target = math.log(width / height)
    return min(buckets, key=lambda bucket: (abs(math.log(bucket.aspect) - target), -bucket.width * bucket.height))
