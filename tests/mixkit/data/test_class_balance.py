"""Class images balanced against training images per epoch, as kohya's DreamBoothDataset does."""

from __future__ import annotations

import logging
from pathlib import Path

from mixkit.data.class_balance import balance_class_images
from mixkit.data.records import ImageRecord


def _records(train_repeats: list[int], class_repeats: list[int]) -> list[ImageRecord]:
    train = [ImageRecord(Path(f"t{i}.png"), "t", n) for i, n in enumerate(train_repeats)]
    classes = [ImageRecord(Path(f"c{i}.png"), "c", n, prior=True) for i, n in enumerate(class_repeats)]
    return train + classes


def test_few_class_images_are_repeated_up_to_the_training_count():
    # 19 training samples (5 + 5 + 5 + 2 + 2) against 6 class images: 13 more repeats, one image at a time.
    records = _records([5, 5, 5, 2, 2], [1] * 6)
    balanced = balance_class_images(records)
    assert balanced[:5] == records[:5]
    assert [r.repeats for r in balanced[5:]] == [4, 3, 3, 3, 3, 3]
    assert sum(r.repeats for r in balanced if r.prior) == 19
    assert [r.path.name for r in balanced[5:]] == [f"c{i}.png" for i in range(6)]


def test_many_class_images_are_cut_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        balanced = balance_class_images(_records([3], [1] * 10))
    assert [(r.path.name, r.repeats) for r in balanced if r.prior] == [("c0.png", 1), ("c1.png", 1), ("c2.png", 1)]
    assert "only the first 3 class images are used" in caplog.text
    # kohya's first pass keeps an image's own repeats whole, so the count may pass the training count by less
    # than one image's repeats.
    assert [r.repeats for r in balance_class_images(_records([3], [2, 2, 2])) if r.prior] == [2, 2]


def test_without_class_images_nothing_changes():
    records = _records([2, 1], [])
    assert balance_class_images(records) == records
