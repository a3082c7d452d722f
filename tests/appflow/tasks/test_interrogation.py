"""The clip_interrogation app: the captioning app's caption, then CLIP's best term of each word list (as
POST /sdapi/v1/interrogate answers), on a shapes-world render whose shape and colour are known."""

from __future__ import annotations

import re

import pytest

from mixkit.data.shapes_render import render_scene
from mixkit.data.shapes_vocab import Scene, ShapeSpec


@pytest.fixture(scope="module")
def flow():
    from appflow import Appflow

    return Appflow("clip_interrogation")


@pytest.fixture(scope="module")
def triangle():
    return render_scene(Scene((ShapeSpec("triangle", "yellow", "large", "center"),), "black"), 64)


def test_the_caption_is_followed_by_the_true_shape_and_colour(flow, triangle):
    from appflow import Appflow

    caption = Appflow("image2text_generation")(image=triangle)["text"]
    result = flow(image=triangle, clip_skip_categories=["sizes"])
    assert result["caption"] == caption
    assert result["text"] == f"{caption}, triangle, yellow"
    assert list(result["terms"]) == ["triangle", "yellow"] and all(0.5 < p <= 1 for p in result["terms"].values())


def test_return_ranks_and_a_word_list_folder(flow, triangle, tmp_path):
    (tmp_path / "colour.txt").write_text("red\nyellow\nblue\n", encoding="utf-8")
    result = flow(image=triangle, categories_dir=str(tmp_path), return_ranks=True)
    assert re.fullmatch(re.escape(result["caption"]) + r", \(yellow:[01]\.\d{3}\)", result["text"])


@pytest.mark.parametrize("options, message", [
    ({"clip_skip_categories": ["artists"]}, r"names \['artists'\]"),
    ({"clip_dict_limit": -1}, "interrogate_clip_dict_limit must be a whole number >= 0"),
    ({"categories_dir": "/no/such/folder"}, "does not exist"),
])
def test_bad_options_are_refused_before_any_step_runs(flow, triangle, options, message):
    with pytest.raises(ValueError, match=f"Task 'clip_interrogation': .*{message}"):
        flow(image=triangle, **options)
