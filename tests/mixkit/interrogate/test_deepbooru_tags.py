"""A1111's DeepBooru text (`tag_multi`): threshold, rating tags dropped, sort, filter, spaces, escaping, ranks."""

from __future__ import annotations

import pytest

from mixkit.interrogate.deepbooru_tags import DeepbooruSettings, format_tags

TAGS = ["solo", "1girl", "rating:safe", "long_hair", "smile_(expression)", "back\\slash", "[bracketed]", "hat"]
SCORES = [0.9, 0.97, 0.99, 0.5, 0.75, 0.6, 0.55, 0.49999]


def test_defaults_are_a1111s():
    assert DeepbooruSettings() == DeepbooruSettings(score_threshold=0.5, sort_alpha=True, use_spaces=True,
                                                    escape=True, filter_tags="", return_ranks=False)


def test_default_text_sorts_by_name_with_spaces_and_escapes_and_drops_ratings_and_low_scores():
    # 0.5 is kept (A1111 drops scores below the threshold only), 0.49999 and the rating tag are not
    assert format_tags(TAGS, SCORES, DeepbooruSettings()) == (
        "1girl, [bracketed], back\\\\slash, long hair, smile \\(expression\\), solo")


def test_score_order_keeps_the_list_order_for_ties():
    settings = DeepbooruSettings(sort_alpha=False, use_spaces=False, escape=False)
    assert format_tags(["b", "a", "c"], [0.7, 0.7, 0.9], settings) == "c, b, a"
    assert format_tags(TAGS, SCORES, settings) == (
        "1girl, solo, smile_(expression), back\\slash, [bracketed], long_hair")


def test_ranks_are_written_with_three_decimals_after_escaping():
    settings = DeepbooruSettings(score_threshold=0.7, return_ranks=True)
    assert format_tags(TAGS, SCORES, settings) == "(1girl:0.970), (smile \\(expression\\):0.750), (solo:0.900)"


def test_filter_tags_accept_spaces_or_underscores_and_ignore_blanks():
    settings = DeepbooruSettings(filter_tags=" long hair ,solo,, smile_(expression)")
    assert format_tags(TAGS, SCORES, settings) == "1girl, [bracketed], back\\\\slash"


def test_threshold_bounds_and_an_empty_answer():
    assert format_tags(TAGS, SCORES, DeepbooruSettings(score_threshold=1)) == ""
    assert format_tags(["a"], [0.0], DeepbooruSettings(score_threshold=0)) == "a"


@pytest.mark.parametrize("values, message", [
    ({"score_threshold": 1.5}, "interrogate_deepbooru_score_threshold must be a number in \\[0, 1\\]"),
    ({"score_threshold": True}, "interrogate_deepbooru_score_threshold"),
    ({"sort_alpha": "yes"}, "deepbooru_sort_alpha must be true or false"),
    ({"escape": 1}, "deepbooru_escape must be true or false"),
    ({"return_ranks": None}, "interrogate_return_ranks must be true or false"),
    ({"filter_tags": ["solo"]}, "deepbooru_filter_tags must be a comma-separated string"),
])
def test_bad_settings_are_refused_naming_the_option(values, message):
    with pytest.raises(ValueError, match=message):
        DeepbooruSettings(**values)


def test_a_tag_list_that_does_not_match_the_scores_is_refused():
    with pytest.raises(ValueError, match="2 tags but 1 probabilities"):
        format_tags(["a", "b"], [0.5], DeepbooruSettings())
