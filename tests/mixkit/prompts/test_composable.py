"""`AND` splitting, checked against A1111 v1.10 get_multicond_prompt_list behaviour."""

import pytest

from mixkit.prompts import get_multicond_prompt_list
from mixkit.prompts.composable import count_and_parts, split_and_parts


@pytest.mark.parametrize("prompt, expected", [
    ("a cat", [("a cat", 1.0)]),
    ("a cat AND a dog", [("a cat", 1.0), (" a dog", 1.0)]),  # leading space kept, trailing dropped
    ("a cat :1.2 AND a dog:0.5", [("a cat", 1.2), (" a dog", 0.5)]),
    ("a cat : -1 AND b", [("a cat", -1.0), (" b", 1.0)]),
    ("a cat:.5", [("a cat", 0.5)]),
    ("a cat:2.", [("a cat", 2.0)]),
    ("a cat:1e3", [("a cat:1e3", 1.0)]),  # no exponents
    ("a cat:nan", [("a cat:nan", 1.0)]),
    ("a candy AND", [("a candy", 1.0), ("", 1.0)]),
    ("ANDROID", [("ANDROID", 1.0)]),  # whole words only
    ("a and b", [("a and b", 1.0)]),  # upper case only
    ("(x:1.2) AND y", [("(x:1.2)", 1.0), (" y", 1.0)]),
    # A1111 v1.10 reads a weight after a multi-line part and drops its trailing whitespace (commit 28bd8e1).
    ("line one\nline two :1.5", [("line one\nline two", 1.5)]),
    ("masterpiece,\nbest quality:1.2 AND cat", [("masterpiece,\nbest quality", 1.2), (" cat", 1.0)]),
    ("a red circle\non blue \n", [("a red circle\non blue", 1.0)]),
])
def test_split_and_parts(prompt, expected):
    assert split_and_parts(prompt) == expected


@pytest.mark.parametrize("prompt", ["a cat", "a cat AND a dog:0.5", "ANDROID AND and AND", "a candy AND", "AND",
                                    "x\nAND\ny AND z:2"])
def test_count_and_parts_counts_what_split_and_parts_makes(prompt):
    assert count_and_parts(prompt) == len(split_and_parts(prompt))


def test_batch_shares_identical_parts():
    indexes, flat, index_of = get_multicond_prompt_list(["a AND b:2", "b:3 AND a", "c"])
    assert flat == ["a", " b", "b", " a", "c"]
    assert indexes == [[(0, 1.0), (1, 2.0)], [(2, 3.0), (3, 1.0)], [(4, 1.0)]]
    assert index_of == {"a": 0, " b": 1, "b": 2, " a": 3, "c": 4}
    indexes, flat, _ = get_multicond_prompt_list(["x AND y", "x AND y"])
    assert flat == ["x", " y"] and indexes[0] == indexes[1]


@pytest.mark.parametrize("prompt", ["a AND b:" + "9" * 45, "a AND b:" + "9" * 400, "a:-101 AND b"])
def test_a_weight_that_would_overflow_is_refused(prompt):
    with pytest.raises(ValueError, match="beyond ±100: it would overflow into a black image"):
        split_and_parts(prompt)
