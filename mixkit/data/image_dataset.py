"""Turn scanned records into deterministic batches of pixel tensors, one bucket per batch.

The order of an epoch is a pure function of (seed, epoch), so a resumed run can jump straight to
batch k of epoch e and see exactly the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from mixkit.data.bucketing import (Bucket, NoBucketError, assign_bucket, check_bucket_inputs, make_buckets,
                                   no_upscale_bucket)
from mixkit.data.records import ImageRecord
from mixkit.errors import MixkitError


class EmptyDatasetError(MixkitError, ValueError):
    """A dataset has no usable image."""


@dataclass(frozen=True)
class BucketSettings:
    """`enabled=False` center-crops everything to resolution x resolution."""

    enabled: bool = False
    step: int = 64
    min_side: int = 256
    max_side: int = 1024
    no_upscale: bool = False  # each image its own bucket, never enlarged (`bucketing.no_upscale_bucket`)


def _resize_and_crop(image, bucket: Bucket, resample=None):
    """Scale to cover the bucket, then center-crop; returns the image and the (top, left) crop offset.

    A loss mask goes through the same geometry with `resample=BOX` (area averaging: no ringing past 0 and 1)."""
    from PIL import Image

    scale = max(bucket.width / image.width, bucket.height / image.height)
    size = (max(bucket.width, round(image.width * scale)), max(bucket.height, round(image.height * scale)))
    image = image.resize(size, Image.Resampling.LANCZOS if resample is None else resample)
    left = (size[0] - bucket.width) // 2
    top = (size[1] - bucket.height) // 2
    return image.crop((left, top, left + bucket.width, top + bucket.height)), (top, left)


def _no_upscale_buckets(records: list[ImageRecord], resolution: int, step: int, source: str) -> list[Bucket]:
    """Each record's own bucket (`no_upscale_bucket`); refuses, naming them, images with a side below the step."""
    buckets, too_small, smallest = [], [], step
    for record in records:
        try:
            buckets.append(no_upscale_bucket(record.width, record.height, resolution, step))
        except NoBucketError as error:
            too_small.append(f"{record.path} ({error})")
            smallest = min(smallest, error.side)
    if too_small:
        shown = "; ".join(too_small[:5]) + (f"; and {len(too_small) - 5} more" if len(too_small) > 5 else "")
        fix = [f"set bucket_step to {smallest // 8 * 8} or less (a multiple of 8)"] if smallest >= 8 else []
        fix += ["turn bucket_no_upscale off (such images are then enlarged into a bucket)",
                "remove or enlarge those images"]
        raise ValueError(
            f"bucket_no_upscale never enlarges an image and rounds each side down to the bucket step ({step}, as kohya "
            f"does), so {len(too_small)} image(s) of {source} have no bucket: {shown}. Either {', '.join(fix[:-1])}, "
            f"or {fix[-1]}.")
    return buckets


class BucketedImageDataset:
    """Records with repeats expanded, each assigned to a bucket; yields batches from one bucket at a time."""

    def __init__(self, records: list[ImageRecord], resolution: int, buckets: BucketSettings = BucketSettings(),
                 *, source: str = "dataset", loss_masks: bool = False) -> None:
        if not records:
            raise EmptyDatasetError(
                f"{source} has no usable images (none found, or all were unreadable); add .png/.jpg files "
                "with .txt captions, in the folder itself or in '<repeats>_<concept>' subfolders."
            )
        if buckets.enabled:
            choices = make_buckets(resolution, step=buckets.step, min_side=min(buckets.min_side, resolution),
                                   max_side=max(buckets.max_side, resolution))
        else:
            check_bucket_inputs(resolution, 8, resolution, resolution)
            choices = [Bucket(resolution, resolution)]
        self.records = records
        self.resolution = resolution
        self.loss_masks = loss_masks
        self.bucketing = buckets.enabled
        if buckets.enabled and buckets.no_upscale:
            self.buckets = _no_upscale_buckets(records, resolution, buckets.step, source)
            choices = sorted(set(self.buckets))  # kohya: only the sizes images have, no predefined set
        else:
            self.buckets = [assign_bucket(r.width, r.height, choices) for r in records]
        self.choices = choices
        # Repeats are realised as duplicated indices, as kohya does, so an epoch has sum(repeats) samples.
        self.samples = [i for i, record in enumerate(records) for _ in range(record.repeats)]

    def __len__(self) -> int:
        return len(self.samples)

    def epoch_batches(self, epoch: int, batch_size: int, seed: int) -> list[list[int]]:
        """The batches of `epoch` (lists of record indices), shuffled within and across buckets."""
        rng = random.Random(f"{seed}:{epoch}")
        by_bucket: dict[Bucket, list[int]] = {}
        for index in self.samples:
            by_bucket.setdefault(self.buckets[index], []).append(index)
        batches: list[list[int]] = []
        for bucket in sorted(by_bucket):
            members = by_bucket[bucket]
            rng.shuffle(members)
            batches.extend(members[i:i + batch_size] for i in range(0, len(members), batch_size))
        rng.shuffle(batches)
        return batches

    def batches_per_epoch(self, batch_size: int) -> int:
        counts: dict[Bucket, int] = {}
        for index in self.samples:
            counts[self.buckets[index]] = counts.get(self.buckets[index], 0) + 1
        return sum(math.ceil(n / batch_size) for n in counts.values())

    def bucket_info(self) -> dict | None:
        """kohya's `ss_bucket_info`: {"buckets": {index: {"resolution": [w, h], "count": samples, repeats
        included}}, "mean_img_ar_error": mean |bucket aspect - image aspect| over images}, indexed in the
        sorted list of bucket sizes and listing only those used; None without bucketing (as kohya)."""
        if not self.bucketing:
            return None
        counts: dict[Bucket, int] = {}
        for index in self.samples:
            counts[self.buckets[index]] = counts.get(self.buckets[index], 0) + 1
        errors = [abs(b.width / b.height - r.width / r.height) for r, b in zip(self.records, self.buckets)]
        return {"buckets": {i: {"resolution": [b.width, b.height], "count": counts[b]}
                            for i, b in enumerate(self.choices) if counts.get(b)},
                "mean_img_ar_error": sum(errors) / len(errors)}

    def load_batch(self, indices: list[int]) -> dict:
        """Pixels in [-1, 1] (B, 3, H, W), captions, SDXL's original size / crop conditioning, loss weights;
        with `loss_masks` also "masks" (B, 1, H, W) in [0, 1], cropped as the pixels are (1 where an image has none)."""
        import numpy as np
        import torch
        from PIL import Image

        from mixkit.data.loss_masks import load_loss_mask
        from mixkit.io.images import load_image

        pixels, captions, original_sizes, crops, masks = [], [], [], [], []
        for index in indices:
            record = self.records[index]
            image = load_image(record.path)
            original_sizes.append((image.height, image.width))
            image, crop = _resize_and_crop(image, self.buckets[index])
            crops.append(crop)
            array = np.asarray(image, dtype=np.float32) / 127.5 - 1.0
            pixels.append(torch.from_numpy(array).permute(2, 0, 1))
            captions.append(record.caption)
            if self.loss_masks:
                mask = load_loss_mask(record.path, record.mask)
                if mask is None:
                    masks.append(torch.ones(1, *array.shape[:2]))
                else:
                    mask, _ = _resize_and_crop(mask, self.buckets[index], Image.Resampling.BOX)
                    masks.append(torch.from_numpy(np.asarray(mask, dtype=np.float32) / 255.0)[None])
        weights = torch.tensor([self.records[i].loss_weight for i in indices], dtype=torch.float32)
        prior = torch.tensor([self.records[i].prior for i in indices], dtype=torch.bool)
        batch = {"pixels": torch.stack(pixels), "captions": captions, "original_sizes": original_sizes, "crops": crops,
                 "loss_weights": weights, "prior": prior}
        if self.loss_masks:
            batch["masks"] = torch.stack(masks)
        return batch
