"""A1111's "Loopback" settings: its four `script_args`, checked, and the per-loop denoising strength schedule.

The schedule is A1111's `calculate_denoising_strength`: the first loop runs at the call's denoising strength, and
loop `n` (counting from 0) of `loops` at `initial + (final - initial) * curve(n / (loops - 1))`, where the curve is
Linear `p`, Aggressive `sin(p * pi / 2)` (most of the change early) or Lazy `1 - cos(p * pi / 2)` (most of it late).
So the last loop runs at the final strength, and a single loop at the call's.

A setting refused here is named after the script, as the other scripts' errors are ("Loopback: loops must be ...");
`parse_script_args` names it as the request's slot ("Loopback: script_args loops must be ..."), the CLI as its flag.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from pipelines.scripts.registry import ScriptArg

TITLE = "Loopback"
MAX_LOOPS = 32  # A1111's Loops slider
CURVES = ("Aggressive", "Linear", "Lazy")
INTERROGATIONS = ("None", "CLIP", "DeepBooru")
ARG_NAMES = ("loops", "final_denoising_strength", "denoising_curve", "append_interrogation")
ARG_DEFAULTS = (4, 0.5, "Linear", "None")


def curve_progress(curve: str, progress: float) -> float:
    """How far along the strength change a loop is, 0 at the first loop and 1 at the last, shaped by `curve`."""
    if curve == "Aggressive":
        return math.sin(progress * math.pi * 0.5)
    if curve == "Lazy":
        return 1 - math.cos(progress * math.pi * 0.5)
    return progress


def loop_strength(loop: int, loops: int, initial: float, final: float, curve: str) -> float:
    """The denoising strength of loop `loop` (0-based) of `loops`: A1111's formula, to the last bit."""
    if loops == 1:
        return initial
    return initial + (final - initial) * curve_progress(curve, loop / (loops - 1))


def strength_schedule(loops: int, initial: float, final: float, curve: str) -> list[float]:
    """Every loop's denoising strength. A1111 runs loop 0 at the call's strength as given (not through the
    formula, which gives the same value but for rounding) and computes each next one after a loop ends."""
    return [initial] + [loop_strength(loop, loops, initial, final, curve) for loop in range(1, loops)]


@dataclass(frozen=True)
class LoopbackConfig:
    """The script's settings, checked on construction (ValueError naming the setting, the value and the range)."""

    loops: int = 4
    final_denoising_strength: float = 0.5
    denoising_curve: str = "Linear"
    append_interrogation: str = "None"

    def __post_init__(self) -> None:
        loops = self.loops
        # the range before float(): a JSON int of 400 digits is an OverflowError there
        if isinstance(loops, bool) or not isinstance(loops, numbers.Real) or not 1 <= loops <= MAX_LOOPS \
                or not float(loops).is_integer():
            raise setting_error("loops", f"must be a whole number from 1 to {MAX_LOOPS} (A1111's Loops slider), "
                                         f"got {loops!r}.")
        object.__setattr__(self, "loops", int(loops))
        strength = self.final_denoising_strength
        if isinstance(strength, bool) or not isinstance(strength, numbers.Real) or not 0 <= strength <= 1:
            raise setting_error("final_denoising_strength", f"must be a number from 0 to 1, got {strength!r}.")
        object.__setattr__(self, "final_denoising_strength", float(strength))
        object.__setattr__(self, "denoising_curve", _choice("denoising_curve", self.denoising_curve, CURVES))
        object.__setattr__(self, "append_interrogation",
                           _choice("append_interrogation", self.append_interrogation, INTERROGATIONS))

    def schedule(self, initial: float) -> list[float]:
        return strength_schedule(self.loops, initial, self.final_denoising_strength, self.denoising_curve)

    def infotext_keys(self) -> dict[str, Any]:
        """A1111's extra generation params of every loop's image (after `Denoising strength`, before `Version`)."""
        return {"Final denoising strength": self.final_denoising_strength, "Denoising curve": self.denoising_curve}


def setting_error(name: str, problem: str) -> ValueError:
    """The error for a refused setting `name`, prefixed with the script's title like the other scripts' errors."""
    return ValueError(f"{TITLE}: {name} {problem}")


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """One of `choices` in any case; A1111 reads an unknown curve as Linear, here it is refused."""
    if isinstance(value, str):
        for choice in choices:
            if value.strip().lower() == choice.lower():
                return choice
    raise setting_error(name, f"must be one of {', '.join(repr(choice) for choice in choices)}, got {value!r}.")


def parse_script_args(script_args: Any, kind: str = "img2img", **context: Any) -> LoopbackConfig:
    """A1111's positional Loopback `script_args` ([loops, final_denoising_strength, denoising_curve,
    append_interrogation]; missing or null slots take A1111's defaults) as a checked `LoopbackConfig`."""
    if kind != "img2img":
        raise ValueError(f"'Loopback' runs for img2img, not {kind!r}: it feeds each image back as the next init image.")
    if not isinstance(script_args, (list, tuple)) or len(script_args) > len(ARG_NAMES):
        got = len(script_args) if isinstance(script_args, (list, tuple)) else type(script_args).__name__
        raise ValueError(f"script_args for 'Loopback' must be a list of at most {len(ARG_NAMES)} values: "
                         f"[{', '.join(ARG_NAMES)}], got {got}.")
    given = [default if value is None else value for value, default in zip(script_args, ARG_DEFAULTS)]
    values = dict(zip(ARG_NAMES, [*given, *ARG_DEFAULTS[len(given):]]))
    try:
        return LoopbackConfig(**values)
    except ValueError as error:
        raise ValueError(str(error).replace(f"{TITLE}: ", f"{TITLE}: script_args ", 1)) from None


def script_args(kind: str = "img2img", **context: Any) -> list[ScriptArg]:
    """The four slots as A1111's script-info lists them: two sliders and two dropdowns."""
    return [ScriptArg("Loops", 4, 1, MAX_LOOPS, 1),
            ScriptArg("Final denoising strength", 0.5, 0, 1, 0.01),
            ScriptArg("Denoising strength curve", "Linear", choices=list(CURVES)),
            ScriptArg("Append interrogated prompt at each iteration", "None", choices=list(INTERROGATIONS))]
