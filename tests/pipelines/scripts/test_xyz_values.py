"""X/Y/Z plot axis value syntax: lists, quotes, ranges, counts and the errors (pipelines/scripts/xyz_values.py)."""

import pytest

from pipelines.scripts.xyz_values import MAX_RANGE_VALUES, float_values, int_values, join_values, split_values


def test_split_values_honours_csv_quotes_and_skips_spaces_and_empties():
    assert split_values('a, "b, c" ,d,, ') == ["a", "b, c", "d"]
    assert split_values("") == []


@pytest.mark.parametrize("text", ["x" * 200_000, '"' + "x" * 200_000 + '"'])
def test_a_value_over_the_csv_field_limit_is_a_value_error(text):
    # csv.Error (not a ValueError) made this a 500 from the HTTP API
    with pytest.raises(ValueError, match="could not be read as comma-separated values"):
        split_values(text)


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
    (int_values, f"1-{MAX_RANGE_VALUES + 5}", f"makes {MAX_RANGE_VALUES + 5} values, more than {MAX_RANGE_VALUES}"),
    (int_values, "0-" + "9" * 30, "more than"),  # past sys.maxsize: len(range) would raise OverflowError
    (float_values, "0-1 (+0.0000000000000000001)", "more than"),
    (float_values, "seven", "Steps takes numbers: 'seven'"),
    (float_values, "nan", "finite"),
    (float_values, "1-2 (+0)", "must not be 0"),
])
def test_bad_values_name_the_axis_and_value(function, text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]").replace("+", r"\+").replace(".", r"\.")):
        function("Steps", [text])


@pytest.mark.parametrize("text", ["0-" + "9" * 400, "0-" + "9" * 400 + " (+1)", "1-2 (+0." + "0" * 309 + "1)",
                                  "0-" + "9" * 400 + " [3]"])
def test_float_ranges_reading_as_infinite_are_refused_not_an_overflow(text):
    # 400 digits read as inf; the count was math.floor(inf): OverflowError, a 500 from the API
    with pytest.raises(ValueError, match="finite numbers"):
        float_values("CFG Scale", [text])


@pytest.mark.parametrize("function, item", [(int_values, "1-5000"), (float_values, "1-5000"),
                                            (int_values, "1-10 [5000]"), (float_values, "1-2 [5000]")])
def test_an_axis_of_many_ranges_is_refused_before_expanding_them_all(function, item):
    # each range is within the bound; together they are not (2,000 of them made 20 million values before the cap)
    assert len(function("Steps", [item, item])) == 10_000
    with pytest.raises(ValueError, match=f"more than {MAX_RANGE_VALUES} in all"):
        function("Steps", [item] * 3)


def test_single_values_count_towards_the_axis_bound():
    with pytest.raises(ValueError, match="in all"):
        int_values("Steps", ["1-10000", "7"])
