"""kohya's non-square --resolution "width,height": one bucket of that size without bucketing, buckets of its area
with it (kohya's make_bucket_resolutions / DreamBoothDataset), and the refusals of sides off the VAE's grid."""

from __future__ import annotations

import math

import pytest
from PIL import Image

from mixkit.data import BucketedImageDataset, make_buckets
from mixkit.data.bucketing import Bucket, check_bucket_inputs, check_resolution, no_upscale_size, resolution_size
from mixkit.data.image_dataset import BucketSettings
from mixkit.data.records import ImageRecord


def _kohya_bucket_table(width, height, min_size, max_size, divisible):
    """kohya's make_bucket_resolutions, written out from its definition: the oracle for the table."""
    max_area = width * height
    side = int(math.sqrt(max_area) // divisible) * divisible
    resos = {(side, side)}
    size = min_size
    while size <= max_size:
        other = min(max_size, int((max_area // size) // divisible) * divisible)
        if other >= min_size:
            resos.add((size, other))
            resos.add((other, size))
        size += divisible
    return sorted(resos)


@pytest.mark.parametrize("resolution", [(512, 768), (768, 512), (1024, 576), (640, 640)])
def test_buckets_of_a_width_height_resolution_are_kohyas_table_for_its_area(resolution):
    buckets = make_buckets(list(resolution), step=64, min_side=256, max_side=1024)
    assert [(b.width, b.height) for b in buckets] == _kohya_bucket_table(*resolution, 256, 1024, 64)
    assert all(b.width * b.height <= resolution[0] * resolution[1] for b in buckets)


def test_512_by_768_has_its_own_size_among_its_buckets_and_a_576_square():
    buckets = make_buckets([512, 768], step=64, min_side=256, max_side=1024)
    # sqrt(512 * 768) = 627.1 -> 576 on the 64 step; 512 wide fits 393216 // 512 = 768 high exactly
    assert Bucket(576, 576) in buckets and Bucket(512, 768) in buckets and Bucket(768, 512) in buckets
    # the same table either way round: the buckets depend on the area, as in kohya
    assert make_buckets([768, 512], step=64, min_side=256, max_side=1024) == buckets


def test_no_upscale_limits_the_area_to_width_times_height():
    # 2000x3000 at 512x768 (area 393216): scaled by sqrt(393216 / 6e6) to 512x768 exactly; kohya rounds to the step
    assert no_upscale_size(2000, 3000, [512, 768], 64) == (512, 768)
    assert no_upscale_size(500, 700, [512, 768], 64) == (500, 700)  # under the area: kept as it is


def _record(tmp_path, name, size) -> ImageRecord:
    path = tmp_path / f"{name}.png"
    image = Image.new("RGB", size, (0, 0, 0))
    # a white column in the middle of the image, to see where the crop was taken
    for y in range(size[1]):
        image.putpixel((size[0] // 2, y), (255, 255, 255))
    image.save(path)
    return ImageRecord(path=path, caption=name, width=size[0], height=size[1])


def test_without_bucketing_every_image_is_centre_cropped_to_width_by_height(tmp_path):
    records = [_record(tmp_path, "wide", (96, 32)), _record(tmp_path, "tall", (32, 96))]
    dataset = BucketedImageDataset(records, [48, 32])
    assert dataset.buckets == [Bucket(48, 32), Bucket(48, 32)] and dataset.bucket_info() is None
    # kohya's cover size: the wide image scaled to height 32 (96x32), the tall one to width 48 (48x144)
    assert dataset.resized_sizes == [(96, 32), (48, 144)]
    batch = dataset.load_batch([0, 1])
    assert tuple(batch["pixels"].shape) == (2, 3, 32, 48)
    # the centre crop keeps the white column in the middle: (96 - 48) // 2 = 24 cropped at the left
    assert batch["crops"] == [(0, 24), (56, 0)]
    assert batch["pixels"][0, 0, :, 24].min().item() > 0.9


def test_with_bucketing_images_go_to_buckets_of_the_resolutions_area_one_bucket_a_batch(tmp_path):
    records = [_record(tmp_path, "wide", (96, 32)), _record(tmp_path, "tall", (32, 96)),
               _record(tmp_path, "square", (64, 64))]
    settings = BucketSettings(True, step=16, min_side=16, max_side=64)
    dataset = BucketedImageDataset(records, [32, 48], settings)
    area = 32 * 48
    assert dataset.choices == [Bucket(*size) for size in _kohya_bucket_table(32, 48, 16, 64, 16)]
    assert all(b.width * b.height <= area for b in dataset.buckets)
    # nearest aspect ratio, as kohya's select_bucket: 3:1 -> 64x16 (4:1 is nearer than 48x32's 1.5), 1:1 -> 32x32
    assert dataset.buckets == [Bucket(64, 16), Bucket(16, 64), Bucket(32, 32)]
    for batch in dataset.epoch_batches(0, batch_size=2, seed=0):
        assert len({dataset.buckets[i] for i in batch}) == 1
    info = dataset.bucket_info()
    assert sorted(tuple(b["resolution"]) for b in info["buckets"].values()) == [(16, 64), (32, 32), (64, 16)]


@pytest.mark.parametrize("value, message", [
    ([512, 766], r"each side must be positive and divisible by 8 .*try 760 for 766"),
    ([512], r"one side \(512\) or \[width, height\]"),
    ("512,768", r"one side \(512\) or \[width, height\]"),
    ([512.0, 768], r"one side \(512\) or \[width, height\]"),
    (True, r"one side \(512\) or \[width, height\]"),
])
def test_a_resolution_off_the_vae_grid_or_of_another_shape_is_refused(value, message):
    with pytest.raises(ValueError, match=message):
        check_resolution(value)


def test_bucket_limits_are_checked_against_each_side_as_kohya_asserts():
    assert resolution_size([512, 768]) == (512, 768) and resolution_size(512) == (512, 512)
    check_bucket_inputs([512, 768], 64, 512, 768)  # min <= 512 and 768 <= max: accepted
    with pytest.raises(ValueError, match=r"min_bucket_reso=576 is above resolution=512x768; .*Lower min_bucket_reso "
                                         "to 512 or less"):
        check_bucket_inputs([512, 768], 64, 576, 1024)
    with pytest.raises(ValueError, match=r"max_bucket_reso=704 is below resolution=512x768; .*Raise max_bucket_reso "
                                         "to 768 or more"):
        check_bucket_inputs([512, 768], 64, 256, 704)
