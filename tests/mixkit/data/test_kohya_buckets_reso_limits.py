"""min_bucket_reso / max_bucket_reso outside the resolution are refused, as kohya refuses them, not clamped.

Reference: kohya-ss/sd-scripts `library/train_util.py`, DreamBoothDataset.__init__ with enable_bucket asserts
min(resolution) >= min_bucket_reso and max(resolution) <= max_bucket_reso, telling the user to change either.
mixkit used to train with min(min_bucket_reso, resolution) while `ss_min_bucket_reso` recorded the value given.
"""

from __future__ import annotations

import pytest

from mixkit.data import BucketedImageDataset, BucketSettings, ImageRecord
from mixkit.data.bucketing import Bucket, make_buckets


def _record(tmp_path, image_writer):
    return [ImageRecord(image_writer(tmp_path / "a.png", size=(64, 32)), "a", 1, "c", 64, 32)]


@pytest.mark.parametrize("no_upscale", [False, True])
def test_min_bucket_reso_above_the_resolution_is_refused(tmp_path, image_writer, no_upscale):
    settings = BucketSettings(True, step=8, min_side=256, max_side=1024, no_upscale=no_upscale)
    with pytest.raises(ValueError, match=r"min_bucket_reso=256 is above resolution=64; kohya refuses this too .*"
                                         r"Lower min_bucket_reso to 64 or less, or raise resolution"):
        BucketedImageDataset(_record(tmp_path, image_writer), 64, settings)


@pytest.mark.parametrize("no_upscale", [False, True])
def test_max_bucket_reso_below_the_resolution_is_refused(tmp_path, image_writer, no_upscale):
    settings = BucketSettings(True, step=8, min_side=16, max_side=48, no_upscale=no_upscale)
    with pytest.raises(ValueError, match=r"max_bucket_reso=48 is below resolution=64; kohya refuses this too .*"
                                         r"Raise max_bucket_reso to 64 or more, or lower resolution"):
        BucketedImageDataset(_record(tmp_path, image_writer), 64, settings)


def test_a_step_above_the_resolution_is_refused():
    # kohya's square bucket would be the resolution floored to the step: 0x0, and its first division fails.
    with pytest.raises(ValueError, match=r"bucket_step=128 is above resolution=64: .* Lower bucket_step to 64 or less"):
        make_buckets(64, step=128, min_side=64, max_side=128)


def test_limits_at_the_resolution_are_used_as_given(tmp_path, image_writer):
    dataset = BucketedImageDataset(_record(tmp_path, image_writer), 64, BucketSettings(True, step=16, min_side=64,
                                                                                       max_side=64))
    assert dataset.choices == [Bucket(64, 64)] and dataset.buckets == [Bucket(64, 64)]
    wide = BucketedImageDataset(_record(tmp_path, image_writer), 64, BucketSettings(True, step=16, min_side=32,
                                                                                    max_side=128))
    assert Bucket(32, 128) in wide.choices and wide.buckets == [Bucket(80, 48)]  # 2:1 nearest 80x48 (5:3)
