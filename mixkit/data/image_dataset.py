"""Turn scanned records into deterministic batches of pixel tensors, one bucket per batch.

The order of an epoch is a pure function of (seed, epoch), so a resumed run can jump straight to
batch k of epoch e and see exactly the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from mixkit.data.bucketing import (Bucket, NoBucketError, assign_bucket, check_resolution, cover_size, make_buckets,
                                   no_upscale_bucket, no_upscale_size)
from mixkit.data.records import EmptyDatasetError, ImageRecord  # EmptyDatasetError: raised here, re-exported


@dataclass(frozen=True)
class BucketSettings:
    """kohya's bucket knobs; `enabled=False` center-crops everything to the resolution (width x height).

    `step`, `min_side` and `max_side` are kohya's bucket_reso_steps, min_bucket_reso and max_bucket_reso; as in
    kohya, min_side <= each side of the resolution <= max_side is required, and refused otherwise rather than
    clamped."""

    enabled: bool = False
    step: int = 64
    min_side: int = 256
    max_side: int = 1024
    no_upscale: bool = False  # each image its own bucket, never enlarged (`bucketing.no_upscale_bucket`)


def _resize_and_crop(image, bucket: Bucket, size: tuple[int, int], resample=None):
    """Resize to `size` (the image's kohya size for its bucket, covering it), then center-crop to the bucket as
    kohya's `trim_and_resize_if_required` does; returns the image and the (top, left) crop offset.

    A loss mask goes through the same geometry with `resample=BOX` (area averaging: no ringing past 0 and 1)."""
    from PIL import Image

    if image.size != size:
        image = image.resize(size, Image.Resampling.LANCZOS if resample is None else resample)
    left = (size[0] - bucket.width) // 2
    top = (size[1] - bucket.height) // 2
    return image.crop((left, top, left + bucket.width, top + bucket.height)), (top, left)


def _no_upscale_buckets(records: list[ImageRecord], resolution, step: int, source: str) -> list[Bucket]:
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


def _check_unchanged(record: ImageRecord, image) -> None:
    """Refuse an image whose size is not the scanned one: its bucket and resize were planned for that size."""
    if image.size != (record.width, record.height):
        raise ValueError(f"{record.path} is {image.width}x{image.height} pixels but was {record.width}x{record.height} "
                         "when the dataset was scanned; it changed since. Restart the run so the dataset is scanned "
                         "again.")


class BucketedImageDataset:
    """Records with repeats expanded, each assigned to a bucket; yields batches from one bucket at a time.

    `resolution` is one side (a square) or kohya's (width, height): without bucketing every image is resized to cover
    it and centre-cropped to it, as kohya's single predefined bucket does; with bucketing it sets the buckets' area."""

    def __init__(self, records: list[ImageRecord], resolution, buckets: BucketSettings = BucketSettings(),
                 *, source: str = "dataset", loss_masks: bool = False) -> None:
        if not records:
            raise EmptyDatasetError(
                f"{source} has no usable images (none found, or all were unreadable); add .png/.jpg files "
                "with .txt captions, in '<repeats>_<concept>' subfolders (images beside such subfolders are ignored, "
                "as kohya ignores them) or, in a folder without such subfolders, in the folder itself."
            )
        if buckets.enabled:
            # Refused, as kohya refuses them, when min_side > resolution or max_side < resolution (they used to be
            # clamped to the resolution while ss_min_bucket_reso recorded the value as given).
            choices = make_buckets(resolution, step=buckets.step, min_side=buckets.min_side, max_side=buckets.max_side)
        else:
            choices = [Bucket(*check_resolution(resolution))]
        self.records = records
        self.resolution = resolution
        self.loss_masks = loss_masks
        self.bucketing = buckets.enabled
        if buckets.enabled and buckets.no_upscale:
            self.buckets = _no_upscale_buckets(records, resolution, buckets.step, source)
            self.resized_sizes = [no_upscale_size(r.width, r.height, resolution, buckets.step) for r in records]
            choices = sorted(set(self.buckets))  # kohya: only the sizes images have, no predefined set
        else:
            self.buckets = [assign_bucket(r.width, r.height, choices) for r in records]
            self.resized_sizes = [cover_size(r.width, r.height, b) for r, b in zip(records, self.buckets)]
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
            _check_unchanged(record, image)
            original_sizes.append((image.height, image.width))
            bucket, size = self.buckets[index], self.resized_sizes[index]
            image, crop = _resize_and_crop(image, bucket, size)
            crops.append(crop)
            array = np.asarray(image, dtype=np.float32) / 127.5 - 1.0
            pixels.append(torch.from_numpy(array).permute(2, 0, 1))
            captions.append(record.caption)
            if self.loss_masks:
                mask = load_loss_mask(record.path, record.mask)
                if mask is None:
                    masks.append(torch.ones(1, *array.shape[:2]))
                else:
                    mask, _ = _resize_and_crop(mask, bucket, size, Image.Resampling.BOX)
                    masks.append(torch.from_numpy(np.asarray(mask, dtype=np.float32) / 255.0)[None])
        weights = torch.tensor([self.records[i].loss_weight for i in indices], dtype=torch.float32)
        prior = torch.tensor([self.records[i].prior for i in indices], dtype=torch.bool)
        batch = {"pixels": torch.stack(pixels), "captions": captions, "original_sizes": original_sizes, "crops": crops,
                 "loss_weights": weights, "prior": prior}
        if self.loss_masks:
            batch["masks"] = torch.stack(masks)
        return batch
