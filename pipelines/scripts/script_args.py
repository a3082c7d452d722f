"""Checks and helpers the Prompt matrix and Prompts from file scripts share: their `script_args` slots read with
A1111's defaults (a null or a missing slot takes the UI's default), and progress counted over a script's calls."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

MAX_MARGIN = 500  # A1111's "Grid margins (px)" slider: 0-500 in steps of 2


def positional_args(title: str, script_args: Any, names: tuple, defaults: tuple) -> dict[str, Any]:
    """`script_args` (a list of at most len(names) values) by slot name, nulls and missing slots at their defaults;
    ValueError listing the slots for anything else."""
    if not isinstance(script_args, (list, tuple)) or len(script_args) > len(names):
        got = len(script_args) if isinstance(script_args, (list, tuple)) else type(script_args).__name__
        raise ValueError(f"script_args for {title!r} must be a list of at most {len(names)} values: "
                         f"[{', '.join(names)}], got {got}.")
    given = [default if value is None else value for value, default in zip(script_args, defaults)]
    return dict(zip(names, [*given, *defaults[len(given):]]))


def check_flag(slot: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):  # a client's 0/1
        return bool(value)
    raise ValueError(f"script_args {slot}: must be true or false, got {value!r}.")


def check_choice(slot: str, value: Any, choices: tuple[str, ...]) -> str:
    """One of `choices`, in any case (A1111's radio buttons send them lower-case)."""
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    raise ValueError(f"script_args {slot}: must be one of {', '.join(repr(c) for c in choices)}, got {value!r}.")


def check_margin(slot: str, value: Any) -> int:
    # the range first: it refuses nan and inf, and a JSON int of 400 digits, which math.isfinite and int() of a
    # float would turn into an OverflowError (a 500)
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_MARGIN
            or value != int(value)):
        raise ValueError(f"script_args {slot}: must be a whole number of pixels 0-{MAX_MARGIN}, got {value!r}.")
    return int(value)


def overall_progress(callback, done_batches: int, total_batches: int):
    """The pipeline's step callback for one call of a script, counting batches over all its calls (A1111's
    job_count), so a progress bar runs once from 0 to 100% over the whole script."""
    if callback is None:
        return None

    def on_step(state):
        callback(replace(state, batch_index=done_batches + state.batch_index, batch_count=total_batches))
    return on_step
