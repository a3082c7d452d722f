"""What each task option takes (type, bounds, choices), declared once so forms and listings need not guess.

A task lists `option_specs` next to its `options` (defaults); `describe_app()["option_specs"]` hands them to the web
UI, which builds sliders, dropdowns and checkboxes from them. The bounds are the ones the task's checks enforce: a
spec either names the pipeline's own constant (`pipelines.text_to_video.MAX_FRAMES`) or is what the check itself
calls (`OptionSpec.check`), so a form's slider and the check cannot disagree. Options without a spec (a
`torch.Generator`, a list of LoRA specs, a server folder) have no form widget; the Python API and HTTP still take them.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Callable

from appflow.task import check_int_option, check_number_option, is_finite_number

OPTION_KINDS = ("int", "float", "bool", "choice", "text", "seed")


@dataclass(frozen=True)
class OptionSpec:
    """One option's type and range. `auto`: None is accepted and means "chosen when the model is known" (its
    recommended steps, its native size). `low_open`: the low bound itself is refused ((0, 120] seconds)."""

    kind: str
    low: float | None = None
    high: float | None = None
    step: float | None = None
    choices: tuple | Callable[[], tuple] = ()
    auto: bool = False
    low_open: bool = False
    label: str = ""

    def __post_init__(self) -> None:
        if self.kind not in OPTION_KINDS:
            raise ValueError(f"OptionSpec kind must be one of {OPTION_KINDS}, got {self.kind!r}.")

    def choice_values(self) -> tuple:
        """The choices (a callable is asked now: sampler names are known once the samplers are registered)."""
        return tuple(self.choices() if callable(self.choices) else self.choices)

    def as_dict(self) -> dict[str, Any]:
        """JSON for `describe_app`: kind, low, high, step, choices, auto, low_open, label."""
        return {"kind": self.kind, "low": self.low, "high": self.high, "step": self.step,
                "choices": list(self.choice_values()), "auto": self.auto, "low_open": self.low_open,
                "label": self.label}

    def check(self, name: str, value: Any) -> Any:
        """`value` if it fits this spec; else ValueError naming the option, the value and what it takes."""
        if value is None and self.auto:
            return value
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false, got {value!r}.")
        elif self.kind in ("int", "seed") and self.low is not None and not self.low_open:
            check_int_option(name, value, int(self.low), self.high)  # the tasks' own check, its message
        elif self.kind in ("int", "seed"):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not self._in_range(value):
                raise ValueError(f"{name} must be an integer {self._range_text()}, got {value!r}.")
        elif self.kind == "float" and not self.low_open:
            check_number_option(name, value, self.low, self.high)
        elif self.kind == "float":
            if not is_finite_number(value) or not self._in_range(value):
                raise ValueError(f"{name} must be a number {self._range_text()}, got {value!r} (NaN and infinities "
                                 "are refused).")
        elif self.kind == "text":
            if not isinstance(value, str):
                raise ValueError(f"{name} must be a string, got {type(value).__name__}.")
        elif value not in self.choice_values():
            raise ValueError(f"{name} must be one of {', '.join(map(repr, self.choice_values()))}, got {value!r}.")
        return value

    def _in_range(self, value) -> bool:
        below = self.low is not None and (value <= self.low if self.low_open else value < self.low)
        return not below and not (self.high is not None and value > self.high)

    def _range_text(self) -> str:
        if self.low is None and self.high is None:
            return ""
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        opening = "(" if self.low_open else "["
        return f"in {opening}{self.low:g}, {self.high:g}]" if self.low is not None else f"<= {self.high:g}"


def sampler_choices() -> tuple:
    """A1111's sampler names, as the txt2img tab lists them."""
    from pipelines.samplers import list_samplers

    return tuple(item["name"] for item in list_samplers())


def schedule_choices() -> tuple:
    from pipelines.samplers import SCHEDULE_TYPES

    return tuple(SCHEDULE_TYPES.names())


def check_options_against_specs(specs: dict[str, OptionSpec], options: dict[str, Any]) -> None:
    """Each option that has a spec checked by it (a task's `check_options` calls this for the bounds it declares)."""
    for name, spec in specs.items():
        if name in options:
            spec.check(name, options[name])
