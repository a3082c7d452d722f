"""mixkit.finite_numbers.is_finite_number: the one check user numbers go through (HTTP JSON, CLI, Python API)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from mixkit.finite_numbers import is_finite_number


@pytest.mark.parametrize("value", [0, -3, 2.5, -1e308, 10 ** 300, np.float32(1.5), np.int64(7), np.float64(-2.0),
                                   Fraction(1, 3)])
def test_a_finite_real_number_is_finite(value):
    assert is_finite_number(value) is True


@pytest.mark.parametrize("value", [10 ** 400, -(10 ** 400), math.nan, math.inf, -math.inf, np.float32("nan"),
                                   np.float64("inf"), True, False, np.bool_(True), "1", None, [1], 1j])
def test_non_numbers_non_finite_values_and_ints_past_floats_range_are_not(value):
    assert is_finite_number(value) is False


def test_a_huge_int_is_the_case_math_isfinite_cannot_answer():
    """Why the check exists: math.isfinite raises on it (a 500 / traceback where it guarded user input)."""
    with pytest.raises(OverflowError):
        math.isfinite(10 ** 400)
    assert is_finite_number(10 ** 400) is False


def test_appflow_uses_the_same_check():
    from appflow.task import is_finite_number as appflow_check

    assert appflow_check is is_finite_number
