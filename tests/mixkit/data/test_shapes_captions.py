"""Captions of the shapes world: exact wording, and the parser reading every caption back."""

from __future__ import annotations

import dataclasses

import pytest

from mixkit.data.shapes import WorldConfig, generate_samples
from mixkit.data.shapes_captions import caption_scene, parse_caption
from mixkit.data.shapes_vocab import COLOURS, SHAPES, Scene, ShapeSpec


def test_plain_and_rich_wording_is_exact():
    one = Scene((ShapeSpec("circle", "red", "small", "left"),), "blue")
    assert caption_scene(one, "plain") == "a red circle on a blue background"
    assert caption_scene(one, "rich") == "a small red circle on the left, on a blue background"
    two = Scene((ShapeSpec("circle", "red", "small"), ShapeSpec("square", "blue", "large")), "white", "left of")
    assert caption_scene(two, "rich") == "a small red circle on the left of a large blue square, on a white background"
    assert caption_scene(two, "plain") == "a red circle and a blue square on a white background"
    orange = Scene((ShapeSpec("star", "orange", "medium", "top left"),), "purple")
    assert caption_scene(orange, "rich") == "a medium orange star at the top left, on a purple background"
    assert caption_scene(orange, "plain") == "an orange star on a purple background"


def test_issue_examples_parse_to_their_attributes():
    assert parse_caption("a red circle on a blue background") == Scene((ShapeSpec("circle", "red"),), "blue")
    parsed = parse_caption("a small red circle on the left of a blue square, on a white background")
    assert parsed == Scene((ShapeSpec("circle", "red", "small"), ShapeSpec("square", "blue")), "white", "left of")


def test_parser_tolerates_case_spacing_and_full_stop():
    expected = Scene((ShapeSpec("cross", "green", "large", "bottom right"),), "black")
    assert parse_caption("  A Large  green cross at the bottom right , on a black background. ") == expected


@pytest.mark.parametrize("style", ["plain", "rich"])
def test_round_trip_over_thousands_of_samples(style):
    world = WorldConfig(shapes=SHAPES, colours=COLOURS, backgrounds=COLOURS, caption_mode=style, two_shape_fraction=0.4)
    samples = generate_samples(3000, seed=7, config=world, split="all")
    for sample in samples:
        parsed = parse_caption(sample.caption)
        if style == "rich":
            assert parsed == sample.scene, sample.caption
        else:  # plain captions name shape, colour and background only
            stripped = tuple(ShapeSpec(o.shape, o.colour) for o in sample.scene.objects)
            assert parsed == dataclasses.replace(sample.scene, objects=stripped, relation=None), sample.caption
    assert {len(s.scene.objects) for s in samples} == {1, 2}


@pytest.mark.parametrize("caption, fragment", [
    ("a red blob on a blue background", "unknown shape 'blob'"),
    ("a pink circle on a blue background", "unknown colour 'pink'"),
    ("a red circle on a teal background", "unknown background colour 'teal'"),
    ("a red circle", "on a <colour> background"),
    ("a red circle on a red background", "must differ from the background"),
    ("a red circle beside a blue square on a white background", "cannot parse caption"),
])
def test_parse_errors_name_the_problem(caption, fragment):
    with pytest.raises(ValueError) as error:
        parse_caption(caption)
    assert fragment in str(error.value)
    assert repr(caption) in str(error.value)


def test_caption_rejects_unknown_style_and_bad_scene():
    scene = Scene((ShapeSpec("circle", "red", "small", "left"),), "blue")
    with pytest.raises(ValueError, match="caption style"):
        caption_scene(scene, "fancy")
    with pytest.raises(ValueError, match="invisible"):
        caption_scene(Scene((ShapeSpec("circle", "blue"),), "blue"))
