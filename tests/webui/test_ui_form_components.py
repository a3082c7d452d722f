"""Slider and Number fields' checks (`webui.ui.form_components.checked_number`): a refusal naming the field."""

from __future__ import annotations

import math

import gradio as gr
import pytest

from webui.ui.form_components import checked_number


@pytest.mark.parametrize("payload", [math.nan, math.inf, 10 ** 400, -10 ** 400, "3", True])
def test_a_value_that_is_no_float_is_refused_naming_the_field(payload):
    with pytest.raises(gr.Error, match=r"Seed must be a number in \[None, None\]"):
        checked_number(payload, "Seed", None, None, allow_empty=True)


def test_numbers_in_range_pass_and_empty_only_when_allowed():
    assert checked_number(10 ** 300, "Seed", None, None, allow_empty=False) == 10 ** 300
    assert checked_number(None, "Seed", None, None, allow_empty=True) is None
    with pytest.raises(gr.Error, match=r"Steps must be a number in \[1, 150\], got 151"):
        checked_number(151, "Steps", 1, 150, allow_empty=False)
    with pytest.raises(gr.Error, match="Steps is empty"):
        checked_number(None, "Steps", 1, 150, allow_empty=False)
