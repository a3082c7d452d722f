"""The training-data steps together: A1111's order, its extra pictures and their suffixes, flips, captions."""

import numpy as np
import pytest
from PIL import Image

from pipelines.extras_training import (TrainingSteps, check_training_steps, file_suffixes, picture_suffixes,
                                       run_training_steps, target_size, write_caption)


def _gradient(width=6, height=4):
    return Image.fromarray(np.arange(width * height * 3, dtype=np.uint8).reshape(height, width, 3))


def test_flipped_copies_are_exact_and_in_a1111s_order():
    image = _gradient()
    pictures = run_training_steps(image, TrainingSteps(flips=("Both", "Horizontal", "Vertical")), None)
    pixels = [np.asarray(p.image) for p in pictures]
    source = np.asarray(image)
    assert len(pixels) == 4
    assert (pixels[0] == source).all()
    assert (pixels[1] == source[:, ::-1]).all()
    assert (pixels[2] == source[::-1]).all()
    assert (pixels[3] == source[::-1, ::-1]).all()
    assert file_suffixes(pictures) == ["", "-1", "-2", "-3"]


def test_captions_join_and_copies_keep_them():
    seen = []

    def captioner(image):
        seen.append(image.size)
        return "a red star"

    pictures = run_training_steps(_gradient(), TrainingSteps(captions=("BLIP",), flips=("Horizontal",)), None,
                                  captioner=captioner)
    assert [p.caption for p in pictures] == ["a red star", "a red star"]
    assert seen == [(6, 4)]  # captioned once, before the flip


def test_deepbooru_tags_come_before_the_blip_caption_as_a1111s():
    def blip(image):
        return "a red star"

    def deepbooru(image):
        return "star, red theme"

    for chosen in (("BLIP", "Deepbooru"), ("Deepbooru", "BLIP")):  # the order chosen does not matter
        [picture] = run_training_steps(_gradient(), TrainingSteps(captions=chosen), None, captioner=blip,
                                       deepbooru=deepbooru)
        assert picture.caption == "star, red theme, a red star"
    [picture] = run_training_steps(_gradient(), TrainingSteps(captions=("Deepbooru",)), None, deepbooru=deepbooru)
    assert picture.caption == "star, red theme"
    [picture] = run_training_steps(_gradient(), TrainingSteps(captions=("Deepbooru", "BLIP")), None,
                                   captioner=lambda image: "", deepbooru=deepbooru)
    assert picture.caption == "star, red theme"  # an empty answer adds no ", "


def test_split_then_flip_order_and_counts():
    # focal crop -> caption -> flip -> split: a 1:3 picture flipped horizontally gives 2 pictures, each split in 4
    image = Image.new("RGB", (64, 192))
    pictures = run_training_steps(image, TrainingSteps(split=True, flips=("Horizontal",)), (64, 64))
    assert len(pictures) == 8 and all(p.image.size == (64, 64) for p in pictures)
    assert file_suffixes(pictures) == ["", "-1", "-2", "-3", "-4", "-5", "-6", "-7"]


def test_the_focal_debug_image_is_tagged_and_not_processed_further():
    image = Image.new("RGB", (128, 64))
    pictures = run_training_steps(image, TrainingSteps(focal_crop=True, focal_debug=True, flips=("Vertical",)),
                                  (64, 64))
    assert [p.nametags for p in pictures] == [[], ["focal-crop-debug"], []]
    assert [p.image.size for p in pictures] == [(64, 64), (128, 64), (64, 64)]  # the debug image was not flipped
    assert file_suffixes(pictures) == ["", "-focal-crop-debug", "-1"]


def test_a_split_into_more_than_a_hundred_crops_gives_every_crop_its_own_file_name():
    # A 512 x 5700 strip cut for 512 x 512 with the largest overlap (0.9) makes 103 crops; A1111's suffixes stop at
    # "-99", after which the crops were named "" again, overwriting the first picture's file
    steps = TrainingSteps(split=True, overlap_ratio=0.9)
    pictures = run_training_steps(Image.new("RGB", (512, 5700)), steps, (512, 512))
    assert len(pictures) == 103
    suffixes = file_suffixes(pictures)
    assert suffixes == ["", *(f"-{n}" for n in range(1, 103))]
    assert suffixes == picture_suffixes(512, 5700, steps, (512, 512))


@pytest.mark.parametrize("steps, message", [
    (TrainingSteps(captions=("deepbooru",)), "'deepbooru' is not one of Deepbooru, BLIP"),
    (TrainingSteps(flips=("Diagonal",)), "'Diagonal' is not one of Horizontal, Vertical, Both"),
    (TrainingSteps(split_threshold=2.0), "split_threshold"),
])
def test_bad_settings_are_refused(steps, message):
    with pytest.raises(ValueError, match=message):
        check_training_steps(steps)


def test_split_and_focal_need_a_target_and_captions_a_captioner():
    with pytest.raises(ValueError, match="positive target size"):
        run_training_steps(_gradient(), TrainingSteps(split=True), None)
    with pytest.raises(ValueError, match="Caption: BLIP needs a captioner and none was given"):
        run_training_steps(_gradient(), TrainingSteps(captions=("BLIP",)), None)
    with pytest.raises(ValueError, match="Caption: Deepbooru needs a tagger and none was given: pass deepbooru=.*"
                                         "--deepdanbooru-models-path"):
        run_training_steps(_gradient(), TrainingSteps(captions=("Deepbooru", "BLIP")), None, captioner=str)


def test_target_size_is_a1111s():
    assert target_size(333, 100, scale_to=None, scale_by=1.5) == (499, 150)
    assert target_size(333, 100, scale_to=(512, 768), scale_by=1.5) == (512, 768)


@pytest.mark.parametrize("action, expected", [("Ignore", "new"), ("Keep", "old"), ("Prepend", "old new"),
                                              ("Append", "new old")])
def test_write_caption_existing_actions(tmp_path, action, expected):
    (tmp_path / "a.txt").write_text("old\n", encoding="utf8")
    assert write_caption(tmp_path / "a.png", "new", action) == tmp_path / "a.txt"
    assert (tmp_path / "a.txt").read_text(encoding="utf8") == expected
    assert write_caption(tmp_path / "b.png", "", action) is None and not (tmp_path / "b.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]  # no temporary file left
