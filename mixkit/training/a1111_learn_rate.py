"""A1111's stepped learning rate ("5e-5:100, 5e-6:1500"), as its Train tab reads the Learning rate field.

A1111's `LearnScheduleIterator`: each `rate:step` pair trains at `rate` until the network's step reaches `step`
(the step the file records, counted across runs); a last pair without a step (or with step -1) runs to the end;
once the last pair's step is reached training ends there, even before Max steps. A pair whose step is already
behind the starting step is skipped, so a file trained to step 120 continues at the second rate. Pure functions
here; the trainer turns them into a LambdaLR over its run's steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class RatePhase:
    rate: float
    until: int | None  # the network step this rate ends at; None: to the end


def parse_learn_rate(text: str) -> list[RatePhase]:
    """The phases of A1111's learn rate text; a ValueError names the pair that is not `rate` or `rate:step`."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"learning_rate_schedule must be A1111's learn rate text like '5e-5:100, 5e-6:1500', "
                         f"got {text!r}")
    phases: list[RatePhase] = []
    pairs = [pair.strip() for pair in text.split(",")]
    for index, pair in enumerate(pairs):
        rate_text, sep, step_text = pair.partition(":")
        try:
            rate = float(rate_text)
            until = int(step_text) if sep else None
        except ValueError:
            raise ValueError(f"learning_rate_schedule {text!r}: {pair!r} is not 'rate' or 'rate:step' (a number and "
                             "a whole step), like '5e-5:100'") from None
        if not math.isfinite(rate) or rate <= 0:
            raise ValueError(f"learning_rate_schedule {text!r}: the rate of {pair!r} must be a positive number")
        if until == -1:
            until = None
        if until is not None and until <= 0:
            raise ValueError(f"learning_rate_schedule {text!r}: the step of {pair!r} must be positive (or -1: to the "
                             "end)")
        if phases and phases[-1].until is not None and until is not None and until <= phases[-1].until:
            raise ValueError(f"learning_rate_schedule {text!r}: steps must increase, {pair!r} ends no later than the "
                             "pair before it")
        phases.append(RatePhase(rate, until))
        if until is None and index < len(pairs) - 1:
            raise ValueError(f"learning_rate_schedule {text!r}: {pair!r} runs to the end, so the pairs after it "
                             "would never apply; give it a step or remove them")
    return phases


def rate_at(phases: list[RatePhase], step: int) -> float | None:
    """The rate of the optimizer step taken at network step `step` (0 for the first step); None: the schedule has
    ended, so A1111 stops training there."""
    for phase in phases:
        if phase.until is None or step < phase.until:
            return phase.rate
    return None


def schedule_end(phases: list[RatePhase]) -> int | None:
    """The network step where training ends by the schedule (None: only max_steps ends it)."""
    return phases[-1].until
