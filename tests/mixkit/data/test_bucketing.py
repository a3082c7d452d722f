import pytest

from mixkit.data import Bucket, assign_bucket, make_buckets


def test_buckets_fit_the_area_and_step():
    buckets = make_buckets(512, step=64, min_side=256, max_side=1024)
    assert Bucket(512, 512) in buckets and Bucket(256, 1024) in buckets and Bucket(1024, 256) in buckets
    for bucket in buckets:
        assert bucket.width % 64 == 0 and bucket.height % 64 == 0
        assert bucket.width * bucket.height <= 512 * 512
    assert Bucket(640, 384) in buckets  # 640 * 384 = 245760 <= 262144, 640 * 448 would exceed it


def test_assign_bucket_by_linear_aspect():
    buckets = make_buckets(512, step=64, min_side=256, max_side=1024)
    assert assign_bucket(1000, 1000, buckets) == Bucket(512, 512)
    assert assign_bucket(2000, 500, buckets) == Bucket(1024, 256)
    # kohya's argmin of |bucket aspect - image aspect|: 1:2 lies between 320x704 (0.045) and 384x640 (0.1).
    assert assign_bucket(500, 1000, buckets) == Bucket(320, 704)


@pytest.mark.parametrize("resolution", [500, 0, -64])
def test_bad_resolution(resolution):
    with pytest.raises(ValueError, match="resolution"):
        make_buckets(resolution)


def test_no_upscale_buckets_round_down_and_shrink_only_large_images():
    from mixkit.data.bucketing import Bucket, NoBucketError, no_upscale_bucket

    assert no_upscale_bucket(500, 300, 512, 64) == Bucket(448, 256)  # small: rounded down, not enlarged
    assert no_upscale_bucket(512, 512, 512, 64) == Bucket(512, 512)
    # 2048x1024 has 8x the area of 512²: scaled by sqrt(1/8) to 724x362; kohya rounds the height to the step (320)
    # and takes the width from the aspect (640), exactly 2:1, nearer than rounding the width (704, then 352 -> 320).
    assert no_upscale_bucket(2048, 1024, 512, 64) == Bucket(640, 320)
    # A side below one step has no bucket it is not enlarged into (kohya's rounds to 0); it used to get 64x64, a 2x
    # enlargement.
    with pytest.raises(NoBucketError, match="40x30 pixels has a side below the bucket step 64") as raised:
        no_upscale_bucket(40, 30, 512, 64)
    assert raised.value.side == 30
    with pytest.raises(NoBucketError, match="4000x40 pixels, 640x6 once scaled down to fit 64x64,"):
        no_upscale_bucket(4000, 40, 64, 8)
    with pytest.raises(ValueError, match="image size must be positive"):
        no_upscale_bucket(0, 10, 512, 64)
