"""Bucket tables, bucket choice and resize sizes against kohya's BucketManager, restated here as the oracle.

Reference: kohya-ss/sd-scripts `library/model_util.py::make_bucket_resolutions` and
`library/train_util.py::BucketManager.select_bucket` / `round_to_steps` / `trim_and_resize_if_required`
(restated below in this test's own words; mixkit's code does not import them).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mixkit.data import BucketedImageDataset, BucketSettings, ImageRecord
from mixkit.data.bucketing import Bucket, assign_bucket, cover_size, make_buckets, no_upscale_bucket, no_upscale_size

# --- kohya's rules, restated -------------------------------------------------------------------------------------


def kohya_table(resolution: int, min_size: int, max_size: int, step: int) -> list[tuple[int, int]]:
    """make_bucket_resolutions: the square of sqrt(area) floored to the step, then every width from min_size up by
    the step with the largest step height fitting the area (capped at max_size, kept if >= min_size), both ways."""
    area = resolution * resolution
    side = int(math.sqrt(area) // step) * step
    table = {(side, side)}
    for width in range(min_size, max_size + 1, step):
        height = min(max_size, int((area // width) // step) * step)
        if height >= min_size:
            table |= {(width, height), (height, width)}
    return sorted(table)


def kohya_predefined_choice(width: int, height: int, table: list[tuple[int, int]]):
    """select_bucket without no_upscale: the image's own size when in the table, else argmin of the plain aspect
    difference (numpy: first index on a tie); resized to cover the bucket, rounding half up."""
    aspect = width / height
    bucket = (width, height)
    if bucket not in table:
        errors = np.abs(np.array([w / h for w, h in table]) - aspect)
        bucket = table[int(errors.argmin())]
    scale = bucket[1] / height if aspect > bucket[0] / bucket[1] else bucket[0] / width
    return bucket, (int(width * scale + 0.5), int(height * scale + 0.5))


def kohya_no_upscale_choice(width: int, height: int, resolution: int, step: int):
    """select_bucket with no_upscale: images above resolution² shrink to that area; one side rounded to the step (half
    up, then down to the step) and the other from the aspect, whichever keeps the aspect closer (strictly, else the
    height-rounded one); the bucket is the resized size floored to the step."""
    def to_step(x):
        x = int(x + 0.5)
        return x - x % step

    aspect = width / height
    area = resolution * resolution
    if width * height > area:
        fit_w = math.sqrt(area * aspect)
        fit_h = area / fit_w
        w1 = to_step(fit_w)
        ar1 = w1 / to_step(w1 / aspect)
        h2 = to_step(fit_h)
        ar2 = to_step(h2 * aspect) / h2
        resized = (w1, int(w1 / aspect + 0.5)) if abs(ar1 - aspect) < abs(ar2 - aspect) else \
            (int(h2 * aspect + 0.5), h2)
    else:
        resized = (width, height)
    return (resized[0] - resized[0] % step, resized[1] - resized[1] % step), resized


def kohya_trim_offset(resized: tuple[int, int], bucket: tuple[int, int]) -> tuple[int, int]:
    """trim_and_resize_if_required without random_crop: centred, the odd pixel going to the right / bottom."""
    return (resized[1] - bucket[1]) // 2, (resized[0] - bucket[0]) // 2  # (top, left), mixkit's crop order


SIZES = [(w, h) for w in range(64, 2200, 37) for h in range(64, 2200, 41)]
CONFIGS = [(512, 256, 1024, 64), (768, 320, 1536, 64), (1024, 512, 2048, 64), (512, 128, 1024, 32),
           (520, 256, 1024, 64)]


# --- tables and choice -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("resolution, min_size, max_size, step", CONFIGS)
def test_bucket_table_and_choice_are_kohyas_for_every_size(resolution, min_size, max_size, step):
    table = kohya_table(resolution, min_size, max_size, step)
    buckets = make_buckets(resolution, step=step, min_side=min_size, max_side=max_size)
    assert [(b.width, b.height) for b in buckets] == table  # same sizes, same (sorted) order
    for width, height in SIZES:
        expected_bucket, expected_size = kohya_predefined_choice(width, height, table)
        bucket = assign_bucket(width, height, buckets)
        assert ((bucket.width, bucket.height), cover_size(width, height, bucket)) == (expected_bucket, expected_size), \
            (width, height)


def test_linear_aspect_distance_picks_kohyas_bucket_where_log_distance_did_not():
    # The hunt's examples (512, step 64, 256..1024): mixkit's log-aspect measure chose the bucket on the right.
    buckets = make_buckets(512, step=64, min_side=256, max_side=1024)
    for size, kohya, log_choice in (((314, 355), (448, 576), (512, 512)), ((307, 586), (320, 704), (384, 640)),
                                    ((307, 850), (256, 832), (320, 768))):
        assert assign_bucket(*size, buckets) == Bucket(*kohya) != Bucket(*log_choice)
    assert assign_bucket(1000, 1000, buckets) == Bucket(512, 512)
    assert assign_bucket(500, 1000, buckets) == Bucket(320, 704)  # 1:2, |0.4545 - 0.5| < |0.6 - 0.5|


def test_an_image_of_a_bucket_size_takes_that_bucket_and_ties_take_the_first():
    # kohya looks the exact size up first; among equal aspect errors numpy's argmin returns the first bucket.
    buckets = [Bucket(64, 128), Bucket(96, 96), Bucket(128, 64)]
    assert assign_bucket(96, 96, buckets) == Bucket(96, 96)
    assert assign_bucket(100, 100, [Bucket(64, 128), Bucket(128, 64)]) == Bucket(64, 128)  # errors 0.5 and 1.0
    assert assign_bucket(2, 1, [Bucket(64, 64), Bucket(192, 64)]) == Bucket(64, 64)  # |1 - 2| == |3 - 2|: the first


def test_the_square_bucket_is_the_resolution_floored_to_the_step():
    # kohya: int(sqrt(area) // step) * step; a 520 resolution at step 64 has a 512x512 bucket, not an off-step 520x520.
    assert Bucket(512, 512) in make_buckets(520, step=64, min_side=256, max_side=1024)
    assert Bucket(520, 520) not in make_buckets(520, step=64, min_side=256, max_side=1024)


def test_cover_size_rounds_half_up_as_kohya():
    # 1029x1024 into 512x512: scale 0.5 makes the width 514.5; kohya's int(x + 0.5) gives 515 (round() gave 514).
    assert cover_size(1029, 1024, Bucket(512, 512)) == (515, 512)
    assert cover_size(1024, 1029, Bucket(512, 512)) == (512, 515)
    assert cover_size(640, 480, Bucket(576, 448)) == (597, 448)


# --- bucket_no_upscale ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("resolution, step", [(512, 64), (1024, 64), (512, 32), (64, 8)])
def test_no_upscale_bucket_and_size_are_kohyas_for_every_size(resolution, step):
    for width, height in SIZES:
        expected_bucket, expected_size = kohya_no_upscale_choice(width, height, resolution, step)
        if min(expected_bucket) == 0:
            continue  # kohya makes an empty bucket and fails; mixkit refuses (tests/mixkit/data/test_bucketing.py)
        bucket = no_upscale_bucket(width, height, resolution, step)
        assert ((bucket.width, bucket.height), no_upscale_size(width, height, resolution, step)) == \
            (expected_bucket, expected_size), (width, height)


def test_no_upscale_resizes_a_camera_photo_to_its_bucket_without_cropping():
    # The hunt's repro: a 4:3 photo got 576x384 (aspect 1.5) and lost 24 rows top and bottom. kohya: 512x384, no crop.
    assert no_upscale_size(4000, 3000, 512, 64) == (512, 384)
    assert no_upscale_bucket(4000, 3000, 512, 64) == Bucket(512, 384)
    # 1000x3000 got 256x832 and lost 13% of its width; kohya resizes it to exactly its bucket.
    assert (no_upscale_bucket(1000, 3000, 512, 64), no_upscale_size(1000, 3000, 512, 64)) == (Bucket(256, 768),
                                                                                             (256, 768))
    # 2048x1024 (2:1): rounding the width gives 704x352 (aspect 2.2 once floored to 704x320), rounding the height
    # gives 640x320, exactly 2:1: kohya takes the latter.
    assert no_upscale_bucket(2048, 1024, 512, 64) == Bucket(640, 320)
    # Images within resolution² keep their size and are floored to the step.
    assert (no_upscale_bucket(500, 300, 512, 64), no_upscale_size(500, 300, 512, 64)) == (Bucket(448, 256), (500, 300))


def test_no_upscale_skips_a_rounding_that_leaves_no_side():
    # 646x9 at 64, step 8 (fitted to 542x7.55): rounding the width (536) leaves a height of 536 / 71.8 = 7.47, 0 on
    # the step, and kohya divides by it (ZeroDivisionError); the height rounding (8, width 574) is taken instead.
    assert no_upscale_size(646, 9, 64, 8) == (574, 8)
    assert no_upscale_bucket(646, 9, 64, 8) == Bucket(568, 8)


def test_no_upscale_batch_keeps_the_whole_photo(tmp_path):
    from PIL import Image

    # 400x300 with a red band over its top 5% at resolution 64, step 8: kohya resizes to 64x48, its own bucket.
    pixels = np.zeros((300, 400, 3), np.uint8)
    pixels[:15] = (255, 0, 0)
    Image.fromarray(pixels).save(tmp_path / "photo.png")
    record = ImageRecord(tmp_path / "photo.png", "x", 1, "c", 400, 300)
    dataset = BucketedImageDataset([record], 64, BucketSettings(True, step=8, min_side=8, max_side=128,
                                                                no_upscale=True))
    assert (dataset.buckets, dataset.resized_sizes) == ([Bucket(64, 48)], [(64, 48)])
    batch = dataset.load_batch([0])
    assert batch["pixels"].shape == (1, 3, 48, 64) and batch["crops"] == [(0, 0)]
    top = batch["pixels"][0, :, 0]  # the band survives (it used to be cropped away with 3 rows of 54)
    assert top[0].min().item() > 0.9 and top[1].max().item() < -0.9


def test_batch_crops_are_kohyas_centre_trim(tmp_path, image_writer):
    sizes = [(100, 60), (60, 100), (90, 64), (257, 129), (33, 97)]
    records = [ImageRecord(image_writer(tmp_path / f"{w}x{h}.png", size=(w, h)), "x", 1, "c", w, h) for w, h in sizes]
    settings = BucketSettings(True, step=16, min_side=16, max_side=128)
    dataset = BucketedImageDataset(records, 64, settings)
    table = kohya_table(64, 16, 128, 16)
    for index, (width, height) in enumerate(sizes):
        bucket, resized = kohya_predefined_choice(width, height, table)
        batch = dataset.load_batch([index])
        assert batch["pixels"].shape[-2:] == (bucket[1], bucket[0])
        assert batch["crops"] == [kohya_trim_offset(resized, bucket)], (width, height)
    upscale_off = BucketedImageDataset(records, 64, BucketSettings(True, step=16, min_side=16, max_side=128,
                                                                   no_upscale=True))
    for index, (width, height) in enumerate(sizes):
        bucket, resized = kohya_no_upscale_choice(width, height, 64, 16)
        assert upscale_off.load_batch([index])["crops"] == [kohya_trim_offset(resized, bucket)], (width, height)


def test_an_image_changed_since_the_scan_is_refused_when_loaded(tmp_path, image_writer):
    path = image_writer(tmp_path / "a.png", size=(64, 32))
    dataset = BucketedImageDataset([ImageRecord(path, "x", 1, "c", 64, 32)], 32)
    image_writer(path, size=(32, 64))
    with pytest.raises(ValueError, match=r"a.png is 32x64 pixels but was 64x32 when the dataset was scanned"):
        dataset.load_batch([0])
