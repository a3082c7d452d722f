"""Infotext values read strictly: what does not read as the type raises ValueError, for the paste to name the key."""

from __future__ import annotations

import pytest

from pipelines.infotext_values import as_integer, as_number


@pytest.mark.parametrize("text, expected", [("7", 7.0), (" 0.5 ", 0.5), ("-1e3", -1000.0)])
def test_as_number_reads_finite_numbers(text, expected):
    assert as_number(text) == expected


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-Infinity", "1e400"])
def test_as_number_refuses_what_is_not_a_finite_number(text):
    """float() reads them all; a pasted "CFG scale: 1e400" reached the HTTP request model as inf (a pydantic dump)."""
    with pytest.raises(ValueError):
        as_number(text)


@pytest.mark.parametrize("text, expected", [("20", 20), ("20.0", 20)])
def test_as_integer_reads_a1111s_spellings(text, expected):
    assert as_integer(text) == expected
