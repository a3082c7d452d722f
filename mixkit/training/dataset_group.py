"""Several bucketed datasets trained as one, as kohya's DatasetGroup trains the datasets of a dataset config.

kohya's DatasetGroup is a ConcatDataset of datasets whose items are whole batches (each dataset batches its
own buckets with its own batch size and resolution), and its DataLoader shuffles those batches together: an
epoch is every batch of every dataset once, a batch never mixes two datasets. Here the same, with the order
a pure function of (seed, epoch) like `BucketedImageDataset`'s, so resume stays exact. A group of one dataset
is that dataset: same batches, same order.
"""

from __future__ import annotations

import bisect
import random

from mixkit.data.image_dataset import BucketedImageDataset


class DatasetGroup:
    """`members` (dataset, its batch size) as one dataset; record indices run through the members in order.

    The `batch_size` argument of `epoch_batches` / `batches_per_epoch` is the run's and is not used: each member
    batches with its own (kohya's per-dataset batch_size), which the caller resolved from the run's already."""

    def __init__(self, members: list[tuple[BucketedImageDataset, int]]) -> None:
        self.members = [dataset for dataset, _ in members]
        self.batch_sizes = [size for _, size in members]
        self.offsets = []
        self.records = []
        for dataset in self.members:
            self.offsets.append(len(self.records))
            self.records += dataset.records

    def __len__(self) -> int:
        return sum(len(dataset) for dataset in self.members)

    def epoch_batches(self, epoch: int, batch_size: int, seed: int) -> list[list[int]]:
        """Every member's batches of `epoch` (as group indices), shuffled together."""
        if len(self.members) == 1:
            return self.members[0].epoch_batches(epoch, self.batch_sizes[0], seed)
        batches = []
        for k, (dataset, size, offset) in enumerate(zip(self.members, self.batch_sizes, self.offsets)):
            batches += [[offset + i for i in batch] for batch in dataset.epoch_batches(epoch, size, f"{seed}:{k}")]
        random.Random(f"{seed}:{epoch}:group").shuffle(batches)
        return batches

    def batches_per_epoch(self, batch_size: int) -> int:
        return sum(dataset.batches_per_epoch(size) for dataset, size in zip(self.members, self.batch_sizes))

    def bucket_info(self) -> dict | None:
        """kohya's `ss_bucket_info` of a single dataset; None for several (each one's is in `ss_datasets`)."""
        return self.members[0].bucket_info() if len(self.members) == 1 else None

    def load_batch(self, indices: list[int]) -> dict:
        """The batch of group indices `indices`, all of one member (as `epoch_batches` makes them)."""
        k = bisect.bisect_right(self.offsets, indices[0]) - 1
        return self.members[k].load_batch([i - self.offsets[k] for i in indices])
