"""X/Y/Z plot axis value syntax: lists, quotes, ranges, counts and the errors (pipelines/scripts/xyz_values.py)."""

import pytest

from pipelines.scripts.xyz_values import MAX_RANGE_VALUES, float_values, int_values, join_values, split_values


def test_split_values_honours_csv_quotes_and_skips_spaces_and_empties():
    assert split_values('a, "b, c" ,d,, ') == ["a", "b, c", "d"]
    assert split_values("") == []


def test_join_values_quotes_what_split_values_would_split():
    values = ["Euler a", "DPM++ 2M, Karras", "x"]
    assert split_values(join_values(values)) == values


@pytest.mark.parametrize("text, expected", [
    ("1-5", [1, 2, 3, 4, 5]),
    ("1-5 (+2)", [1, 3, 5]),
    ("1 - 6 (+2)", [1, 3, 5]),
    ("10-1 (-3)", [10, 7, 4, 1]),
    ("10-20 [3]", [10, 15, 20]),
    ("1-10 [4]", [1, 4, 7, 10]),
    ("0-1 [3]", [0, 0, 1]),  # A1111's int() of np.linspace truncates
    ("-1", [-1]),
    ("7", [7]),
    ("5-1", []),  # a step away from the end gives nothing (the caller refuses an empty axis)
])
def test_int_values(text, expected):
    assert int_values("Steps", [text]) == expected


def test_int_values_join_items_in_order():
    assert int_values("Steps", ["3", "1-2", "9"]) == [3, 1, 2, 9]


@pytest.mark.parametrize("text, expected", [
    ("0.5-1.5 (+0.5)", [0.5, 1.0, 1.5]),
    ("0.1-0.3 (+0.1)", [0.1, 0.2, 0.3]),  # np.arange gives a fourth value past the end here
    ("1-2 [5]", [1.0, 1.25, 1.5, 1.75, 2.0]),
    ("7.5", [7.5]),
    ("-1.5", [-1.5]),
    ("3-1 (-1)", [3.0, 2.0, 1.0]),
])
def test_float_values(text, expected):
    assert float_values("CFG Scale", [text]) == expected


@pytest.mark.parametrize("function, text, message", [
    (int_values, "abc", "Steps takes whole numbers: 'abc'"),
    (int_values, "1.5", "Steps takes whole numbers: '1.5'"),
    (int_values, "1-5 (+0)", "must not be 0"),
    (int_values, "1-5 [0]", "count in [...] must be 1"),
    (int_values, f"1-{MAX_RANGE_VALUES + 5}", "count in [...] must be 1"),
    (float_values, "seven", "Steps takes numbers: 'seven'"),
    (float_values, "nan", "finite"),
    (float_values, "1-2 (+0)", "must not be 0"),
])
def test_bad_values_name_the_axis_and_value(function, text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]").replace("+", r"\+").replace(".", r"\.")):
        function("Steps", [text])
