"""A1111's split rule: boxes and counts hand-computed from `ceil((h - to_h * o) / (to_h * (1 - o)))` and the even
spread `int(i * (h - to_h) / (count - 1))`."""

import pytest
from PIL import Image

from pipelines.split_oversized import check_split_settings, split_oversized, split_plan


@pytest.mark.parametrize("size, target, threshold, overlap, resized, boxes", [
    # portrait 1:3 on a square target: ratio 1/3; long side 1536, 4 crops, step 1024/3
    ((512, 1536), (512, 512), 0.5, 0.2, (512, 1536),
     [(0, 0, 512, 512), (0, 341, 512, 853), (0, 682, 512, 1194), (0, 1024, 512, 1536)]),
    # landscape 5:2: ratio 0.4; resized to the target's height (1280 x 512), 3 crops left to right, step 384
    ((1000, 400), (512, 512), 0.5, 0.2, (1280, 512), [(0, 0, 512, 512), (384, 0, 896, 512), (768, 0, 1280, 512)]),
    # 512 x 900 at threshold 0.6: ratio 0.569, 2 crops at both ends
    ((512, 900), (512, 512), 0.6, 0.2, (512, 900), [(0, 0, 512, 512), (0, 388, 512, 900)]),
    # no overlap: 1:2 is exactly two halves
    ((512, 1024), (512, 512), 0.5, 0.0, (512, 1024), [(0, 0, 512, 512), (0, 512, 512, 1024)]),
    # portrait target 512 x 768, source 300 x 1000: ratio 0.45, long side 1000 * 512 // 300 = 1706, 3 crops
    ((300, 1000), (512, 768), 0.5, 0.2, (512, 1706), [(0, 0, 512, 768), (0, 469, 512, 1237), (0, 938, 512, 1706)]),
    # overlap 0.5 on 1:3: ceil((1536 - 256) / 256) = 5 crops, step 256
    ((256, 768), (256, 256), 0.5, 0.5, (256, 768),
     [(0, 0, 256, 256), (0, 128, 256, 384), (0, 256, 256, 512), (0, 384, 256, 640), (0, 512, 256, 768)]),
])
def test_split_boxes_are_a1111s(size, target, threshold, overlap, resized, boxes):
    plan = split_plan(*size, *target, threshold, overlap)
    assert plan.resized == resized
    assert list(plan.boxes) == boxes


@pytest.mark.parametrize("size, target, threshold", [
    ((512, 900), (512, 512), 0.5),  # ratio 0.569 is over the threshold: A1111 1.6+ would split it anyway
    ((512, 512), (512, 512), 0.5),  # same aspect
    ((1024, 512), (1024, 512), 1.0),  # same aspect, even at threshold 1 (ratio 1 is not below 1)
    ((600, 400), (512, 512), 0.0),  # threshold 0 splits nothing
])
def test_images_within_the_threshold_are_not_split(size, target, threshold):
    assert split_plan(*size, *target, threshold, 0.2) is None


def test_the_crops_are_the_resized_picture_cut_at_the_boxes():
    image = Image.new("RGB", (100, 300))
    for y in range(300):
        image.paste((y % 256, 0, 0), (0, y, 100, y + 1))
    crops = split_oversized(image, 100, 100)
    assert [crop.size for crop in crops] == [(100, 100)] * 4
    assert [crop.getpixel((50, 0))[0] for crop in crops] == [0, 66, 133, 200]


def test_an_image_that_is_not_split_comes_back_as_it_is():
    image = Image.new("RGB", (64, 64))
    assert split_oversized(image, 64, 64) == [image]


@pytest.mark.parametrize("threshold, overlap, name", [(1.5, 0.2, "split_threshold"), (0.5, 0.95, "overlap_ratio"),
                                                      (-0.1, 0.2, "split_threshold"), (0.5, True, "overlap_ratio")])
def test_settings_out_of_the_sliders_range_are_refused(threshold, overlap, name):
    with pytest.raises(ValueError, match=name):
        check_split_settings(threshold, overlap)


def test_a_strip_resized_beyond_the_extras_pixel_budget_is_refused_before_any_work():
    # 1 x 70 for a 512 x 512 target is resized to 512 x 35840 (18.4 M pixels) before the cut; a 1 x 4000 strip asked
    # for a billion pixels and the process was killed for memory
    with pytest.raises(ValueError, match=r"a 1x70 picture would be resized to 512 x 35840 \(18350080 pixels"):
        split_plan(1, 70, 512, 512)
    with pytest.raises(ValueError, match="Split oversized images"):
        split_oversized(Image.new("RGB", (70, 1)), 512, 512)
    assert len(split_plan(1, 60, 512, 512).boxes) == 75  # 512 x 30720: within the budget
