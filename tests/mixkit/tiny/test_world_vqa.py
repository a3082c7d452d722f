"""VQA pairs of the shapes world are exact and never ambiguous."""

from __future__ import annotations

import pytest

from mixkit.data.shapes_vocab import Scene, ShapeSpec
from mixkit.tiny.world_vqa import question_kind, scene_questions


def test_single_shape_questions():
    scene = Scene((ShapeSpec("star", "red", "small", "top left"),), "blue")
    assert dict(scene_questions(scene)) == {
        "what colour is the background?": "blue", "how many shapes are there?": "one",
        "what colour is the star?": "red", "what size is the star?": "small", "where is the star?": "top left",
        "what shape is it?": "star"}


def test_two_shapes_of_the_same_kind_are_not_asked_about():
    scene = Scene((ShapeSpec("circle", "red", "small"), ShapeSpec("circle", "green", "large")), "white", "left of")
    pairs = dict(scene_questions(scene))
    assert "what colour is the circle?" not in pairs
    assert pairs["how many shapes are there?"] == "two"
    other = Scene((ShapeSpec("circle", "red", "small"), ShapeSpec("cross", "green", "large")), "white", "above")
    assert dict(scene_questions(other))["what colour is the cross?"] == "green"


def test_every_question_has_its_kind_and_a_foreign_one_is_refused():
    scene = Scene((ShapeSpec("star", "red", "small", "top left"),), "blue")
    kinds = {question_kind(q): a for q, a in scene_questions(scene)}
    assert kinds == {"background": "blue", "count": "one", "colour": "red", "size": "small",
                     "position": "top left", "shape": "star"}
    with pytest.raises(ValueError, match="not a shapes-world question"):
        question_kind("is it raining?")
