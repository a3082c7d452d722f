"""Slider and Number fields whose refusals are one "UI refused:" line naming the field, not Gradio's traceback.

Gradio's own `Slider/Number.preprocess` raise a plain `gr.Error` for a value outside the range (logged
with a ~40-line traceback) and fail on an empty value with "Could not preprocess input component at
index 4". A browser's slider clamps, so only API clients (gradio_client) and stale pages send such
values; they now get the field's label, the range and what was sent.
"""

from __future__ import annotations

import gradio as gr

from mixkit.finite_numbers import is_finite_number
from webui.ui.errors import refused


def checked_number(payload, label: str, minimum: float | None, maximum: float | None, *, allow_empty: bool):
    """`payload` if it is a number in [minimum, maximum] (or None when `allow_empty`), else a refusal naming `label`."""
    wanted = f"a number in [{_plain(minimum)}, {_plain(maximum)}]"
    if payload is None:
        if allow_empty:
            return None
        raise refused(f"{label} is empty; give {wanted}.")
    # is_finite_number also refuses a client's 400-digit int (math.isfinite and Gradio's rounding raise OverflowError)
    if not is_finite_number(payload):
        raise refused(f"{label} must be {wanted}, got {payload!r}.")
    if (minimum is not None and payload < minimum) or (maximum is not None and payload > maximum):
        raise refused(f"{label} must be {wanted}, got {_plain(payload)}.")
    return payload


def _plain(value) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def form_slider(*args, **kwargs) -> gr.Slider:
    """A `gr.Slider` whose bad values are refused through `checked_number`.

    The check replaces the instance's `preprocess` rather than living in a subclass: Gradio writes a `.pyi`
    stub next to the module of every Component subclass when the class is created, which would write into
    the installed package (and fail on a read-only one)."""
    slider = gr.Slider(*args, **kwargs)

    def preprocess(payload):
        value = checked_number(payload, slider.label or "A slider", slider.minimum, slider.maximum, allow_empty=False)
        return gr.Number.round_to_precision(value, slider.precision)

    slider.preprocess = preprocess
    return slider


def form_number(*args, **kwargs) -> gr.Number:
    """A `gr.Number` whose bad values are refused; an empty box is passed on as None, for the handler to give it
    its meaning (an empty Seed is random, as in A1111)."""
    number = gr.Number(*args, **kwargs)

    def preprocess(payload):
        value = checked_number(payload, number.label or "A number", number.minimum, number.maximum, allow_empty=True)
        return None if value is None else gr.Number.round_to_precision(value, number.precision)

    number.preprocess = preprocess
    return number
