import pytest

from mixkit.data import BucketedImageDataset, BucketSettings, EmptyDatasetError, ImageRecord


def _records(tmp_path, image_writer):
    wide = image_writer(tmp_path / "wide.png", size=(64, 32), colour=(255, 0, 0))
    tall = image_writer(tmp_path / "tall.png", size=(32, 64), colour=(0, 0, 255))
    return [ImageRecord(wide, "wide", 2, "c", 64, 32), ImageRecord(tall, "tall", 1, "c", 32, 64)]


def test_batches_are_deterministic_single_bucket_and_cover_repeats(tmp_path, image_writer):
    dataset = BucketedImageDataset(_records(tmp_path, image_writer), 32, BucketSettings(True, step=16, min_side=16, max_side=64))
    assert len(dataset) == 3
    batches = dataset.epoch_batches(0, 2, seed=1)
    assert batches == dataset.epoch_batches(0, 2, seed=1)
    assert sorted(i for b in batches for i in b) == [0, 0, 1]
    assert len(batches) == dataset.batches_per_epoch(2) == 2  # two buckets: wide (twice) and tall
    for batch in batches:
        assert len({dataset.buckets[i] for i in batch}) == 1
    loaded = dataset.load_batch(batches[0])
    bucket = dataset.buckets[batches[0][0]]
    assert loaded["pixels"].shape[-2:] == (bucket.height, bucket.width)
    assert loaded["pixels"].min() >= -1 and loaded["pixels"].max() <= 1


def test_square_crop_keeps_colour(tmp_path, image_writer):
    dataset = BucketedImageDataset(_records(tmp_path, image_writer), 16)
    pixels = dataset.load_batch([0])["pixels"]
    assert pixels.shape == (1, 3, 16, 16)
    assert dataset.load_batch([0, 1])["loss_weights"].tolist() == [1.0, 1.0]
    assert pixels[0, 0].mean().item() == pytest.approx(1.0) and pixels[0, 2].mean().item() == pytest.approx(-1.0)


def test_empty_dataset_and_bad_resolution(tmp_path, image_writer):
    with pytest.raises(EmptyDatasetError, match="no usable images"):
        BucketedImageDataset([], 32, source="/data/x")
    with pytest.raises(ValueError, match="divisible by 8"):
        BucketedImageDataset(_records(tmp_path, image_writer), 30)


def test_no_upscale_keeps_each_small_image_at_its_own_size(tmp_path, image_writer):
    small = image_writer(tmp_path / "small.png", size=(40, 24), colour=(0, 255, 0))
    records = [*_records(tmp_path, image_writer), ImageRecord(small, "small", 1, "c", 40, 24)]
    settings = BucketSettings(True, step=8, min_side=16, max_side=64, no_upscale=True)
    dataset = BucketedImageDataset(records, 32, settings)
    # 64x32 and 32x64 have twice 32²: scaled to area 32² (45x22.6), kohya rounds the shorter side to the step (16)
    # and takes the other from the aspect (32), exactly 2:1, where 40x16 was 2.5:1; 40x24 stays itself.
    assert [(b.width, b.height) for b in dataset.buckets] == [(32, 16), (16, 32), (40, 24)]
    loaded = dataset.load_batch([2])
    assert loaded["pixels"].shape == (1, 3, 24, 40)
    assert loaded["pixels"][0, 1].mean().item() == pytest.approx(1.0)


def test_no_upscale_refuses_an_image_with_a_side_below_the_step_instead_of_enlarging_it(tmp_path, image_writer):
    # 32x64 at the default step 64: rounded down its width is 0 (kohya's bucket manager then divides by it); rounding
    # up to 64 enlarged it 2x, against bucket_no_upscale's promise. Refused before training, naming the way out.
    narrow = image_writer(tmp_path / "narrow.png", size=(32, 64))
    records = [ImageRecord(narrow, "n", 1, "c", 32, 64), *_records(tmp_path, image_writer)]
    settings = BucketSettings(True, step=64, min_side=32, max_side=64, no_upscale=True)
    with pytest.raises(ValueError) as raised:
        BucketedImageDataset(records, 64, settings, source="/data/x")
    message = str(raised.value)
    assert "3 image(s) of /data/x have no bucket" in message and str(narrow) in message
    assert "(32x64 pixels has a side below the bucket step 64)" in message
    assert "set bucket_step to 32 or less (a multiple of 8)" in message and "turn bucket_no_upscale off" in message
    # At a step the images reach, every side is kept or shrunk, never enlarged.
    dataset = BucketedImageDataset(records, 64, BucketSettings(True, step=32, min_side=32, max_side=64,
                                                               no_upscale=True))
    for record, bucket in zip(records, dataset.buckets):
        assert bucket.width <= record.width and bucket.height <= record.height
    assert [(b.width, b.height) for b in dataset.buckets] == [(32, 64), (64, 32), (32, 64)]


def test_bucket_info_is_kohyas(tmp_path, image_writer):
    settings = BucketSettings(True, step=16, min_side=16, max_side=64)
    dataset = BucketedImageDataset(_records(tmp_path, image_writer), 32, settings)
    info = dataset.bucket_info()
    # Indices into the sorted bucket list, only the used ones, counts with repeats (wide.png twice).
    index = {b: i for i, b in enumerate(dataset.choices)}
    wide, tall = dataset.buckets
    assert info["buckets"] == {index[wide]: {"resolution": [wide.width, wide.height], "count": 2},
                               index[tall]: {"resolution": [tall.width, tall.height], "count": 1}}
    assert info["mean_img_ar_error"] == pytest.approx(
        (abs(wide.width / wide.height - 2.0) + abs(tall.width / tall.height - 0.5)) / 2)
    assert BucketedImageDataset(_records(tmp_path, image_writer), 32).bucket_info() is None  # kohya: no bucketing
