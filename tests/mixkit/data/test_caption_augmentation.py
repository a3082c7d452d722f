"""Caption augmentation: kept tags stay in front, the rest shuffle and drop as asked, all from the given RNG."""

from __future__ import annotations

import random

import pytest

from mixkit.data.caption_augmentation import CaptionAugmentation, augment_caption

CAPTION = "sks, 1girl, red hair, smile, outdoors"


def test_the_defaults_leave_the_caption_as_written():
    assert augment_caption("a  red square,flat ", CaptionAugmentation(), random.Random(0)) == "a  red square,flat "


def test_shuffling_keeps_the_first_tags_and_permutes_the_rest():
    settings = CaptionAugmentation(shuffle=True, keep_tokens=1)
    seen = set()
    for seed in range(30):
        tags = augment_caption(CAPTION, settings, random.Random(seed)).split(", ")
        assert tags[0] == "sks" and sorted(tags[1:]) == sorted(["1girl", "red hair", "smile", "outdoors"])
        seen.add(tuple(tags))
    assert len(seen) > 10
    # The same draw gives the same caption: that is what makes resume exact.
    assert augment_caption(CAPTION, settings, random.Random(5)) == augment_caption(CAPTION, settings, random.Random(5))


def test_an_explicit_draw_gives_the_expected_caption():
    # shuffle then tag dropout, both from one RNG: replay the same calls by hand.
    settings = CaptionAugmentation(shuffle=True, keep_tokens=2, tag_dropout_rate=0.5)
    rng = random.Random(42)
    flexible = ["red hair", "smile", "outdoors"]
    rng.shuffle(flexible)
    expected = ["sks", "1girl"] + [tag for tag in flexible if rng.random() >= 0.5]
    assert augment_caption(CAPTION, settings, random.Random(42)) == ", ".join(expected)


def test_dropout_rates_of_one_drop_everything_they_may():
    assert augment_caption(CAPTION, CaptionAugmentation(dropout_rate=1.0), random.Random(0)) == ""
    assert augment_caption(CAPTION, CaptionAugmentation(tag_dropout_rate=1.0, keep_tokens=1),
                           random.Random(0)) == "sks"
    assert augment_caption("a | b | c", CaptionAugmentation(shuffle=True, keep_tokens=3, separator="|"),
                           random.Random(0)) == "a, b, c"  # kohya rejoins with ", "


def test_the_rates_drop_about_as_often_as_asked():
    settings = CaptionAugmentation(dropout_rate=0.25)
    rng = random.Random(1)
    dropped = sum(augment_caption(CAPTION, settings, rng) == "" for _ in range(4000))
    assert 900 < dropped < 1100


@pytest.mark.parametrize("settings, message", [
    (CaptionAugmentation(shuffle="yes"), "shuffle_caption must be true or false"),
    (CaptionAugmentation(keep_tokens=-1), "keep_tokens must be an integer >= 0"),
    (CaptionAugmentation(tag_dropout_rate=1.5), "caption_tag_dropout_rate must be a probability"),
    (CaptionAugmentation(dropout_rate=True), "caption_dropout_rate must be a probability"),
    (CaptionAugmentation(separator=" "), "caption_separator must be a non-blank string"),
])
def test_bad_settings_are_named(settings, message):
    with pytest.raises((ValueError, TypeError), match=message):
        settings.check()


def test_prefix_suffix_and_the_keep_separator():
    settings = CaptionAugmentation(prefix="sks,", suffix=", masterpiece")
    assert augment_caption("1girl, smile", settings, random.Random(0)) == "sks, 1girl, smile, masterpiece"
    # With the separator the parts around it stay put, in order, and only the middle shuffles / drops.
    settings = CaptionAugmentation(shuffle=True, tag_dropout_rate=0.5, keep_separator="|||", keep_tokens=5)
    for seed in range(20):
        tags = augment_caption("sks, 1girl ||| red hair, smile, outdoors ||| best quality", settings,
                               random.Random(seed)).split(", ")
        assert tags[:2] == ["sks", "1girl"] and tags[-1] == "best quality"
        assert set(tags[2:-1]) <= {"red hair", "smile", "outdoors"}
    # Without a shuffle or dropout the separator still goes: it is markup, not caption text.
    assert augment_caption("a ||| b, c", CaptionAugmentation(keep_separator="|||"), random.Random(0)) == "a, b, c"
    with pytest.raises(ValueError, match="keep_tokens_separator must be"):
        CaptionAugmentation(keep_separator=",").check()
