"""`webui.cli.caption_merge`: `--existing append` adds an answer's parts to a caption file without a tag twice, the
file's own text kept as written."""

from __future__ import annotations

import pytest

from webui.cli.caption_merge import appended_caption, new_parts, tag_key


@pytest.mark.parametrize("spelling, key", [
    ("long_hair", "long hair"), ("  Long   Hair ", "long hair"),  # DeepBooru's use-spaces off / a hand-typed tag
    ("hat \\(object\\)", "hat (object)"), ("hat_(object)", "hat (object)"),  # its escaping on / off
    ("(1girl:0.953)", "1girl"), ("(long hair:1)", "long hair"),  # --return-ranks
    ("(masterpiece)", "(masterpiece)"),  # brackets without a rank are the tag's own
])
def test_tag_key_is_what_two_spellings_of_a_tag_share(spelling, key):
    assert tag_key(spelling) == key


def test_new_tags_follow_the_file_kept_as_written():
    existing = "smile, my_character,  long_hair\n"
    assert appended_caption(existing, ["1girl", "long hair", "smile", "solo"]) == \
        "smile, my_character,  long_hair, 1girl, solo"


def test_nothing_new_leaves_the_file_alone():
    assert appended_caption("1girl, long hair, smile, solo", ["(1girl:0.953)", "solo", "long_hair"]) is None
    assert appended_caption("a, b", []) is None


def test_an_empty_or_blank_file_takes_the_answer():
    assert appended_caption("", ["1girl", "solo"]) == "1girl, solo"
    assert appended_caption(" \n", ["1girl"]) == "1girl"


def test_a_trailing_comma_is_not_doubled():
    assert appended_caption("1girl, solo,\n", ["smile"]) == "1girl, solo, smile"


def test_a_caption_holding_commas_counts_as_there_only_with_its_pieces_in_a_row():
    caption = "a red circle , on a blue background"
    assert new_parts(f"{caption}, circle", [caption, "circle", "red"]) == ["red"]
    assert new_parts("a red circle, on a blue background", [caption]) == []
    assert new_parts("on a blue background, a red circle", [caption, "red"]) == [caption, "red"]


def test_a_part_repeated_in_the_answer_is_added_once():
    assert new_parts("solo", ["1girl", "1girl", "long_hair", "long hair"]) == ["1girl", "long_hair"]
