"""Sampler and schedule names in infotexts, old style ("DPM++ 2M Karras") and new style.

Before A1111 1.9 the noise schedule was part of the sampler name ("DPM++ 2M Karras"); since then
it is a separate "Schedule type: Karras" key. Infotexts of both styles circulate (Civitai keeps
the old ones), so readers must split a schedule suffix off the sampler name the way A1111's
`sd_samplers.get_sampler_and_scheduler` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

AUTOMATIC_SCHEDULE = "Automatic"


@dataclass(frozen=True)
class ScheduleName:
    """One A1111 schedule: the label written in infotexts, its internal name and extra aliases."""

    name: str
    label: str
    aliases: tuple[str, ...] = field(default_factory=tuple)

    def spellings(self) -> tuple[str, ...]:
        return (self.label, self.name, *self.aliases)


# A1111's `modules/sd_schedulers.py`, in its order: the order matters because A1111 tries the
# suffixes in this order and a later match wins ("Euler Karras Exponential" ends in "Exponential").
A1111_SCHEDULES = (
    ScheduleName("automatic", "Automatic"),
    ScheduleName("uniform", "Uniform"),
    ScheduleName("karras", "Karras"),
    ScheduleName("exponential", "Exponential"),
    ScheduleName("polyexponential", "Polyexponential"),
    ScheduleName("sgm_uniform", "SGM Uniform", ("SGMUniform",)),
    ScheduleName("kl_optimal", "KL Optimal"),
    ScheduleName("align_your_steps", "Align Your Steps"),
    ScheduleName("simple", "Simple"),
    ScheduleName("normal", "Normal"),
    ScheduleName("ddim", "DDIM"),
    ScheduleName("beta", "Beta"),
)
SCHEDULE_LABELS = {spelling: schedule.label for schedule in A1111_SCHEDULES for spelling in (schedule.name, schedule.label)}


def split_sampler_name(sampler: str) -> tuple[str, str | None]:
    """Split an old-style sampler name into (sampler, schedule label): "DPM++ 2M Karras" -> ("DPM++ 2M", "Karras").

    A name without a schedule suffix comes back unchanged with `None`.
    """
    if not isinstance(sampler, str):
        raise TypeError(f"sampler name must be a str, got {type(sampler).__name__}: {sampler!r}")
    found: str | None = None
    name = sampler
    for schedule in A1111_SCHEDULES:
        for spelling in schedule.spellings():
            if name.endswith(" " + spelling):
                found = schedule.label
                name = name[: -(len(spelling) + 1)]
                break
    return name, found


def sampler_and_schedule(params: Mapping[str, object]) -> tuple[str | None, str]:
    """The (sampler, schedule label) an infotext asks for, as A1111 fills its two UI fields on paste.

    A schedule suffix on the sampler name wins over the "Schedule type" key (A1111 does the same);
    an unknown or missing schedule is "Automatic" (the sampler's own default schedule).
    """
    raw_sampler = params.get("Sampler")
    raw_schedule = params.get("Schedule type")
    schedule = SCHEDULE_LABELS.get(raw_schedule, AUTOMATIC_SCHEDULE) if isinstance(raw_schedule, str) else AUTOMATIC_SCHEDULE
    if not isinstance(raw_sampler, str):
        return None, schedule
    sampler, suffix = split_sampler_name(raw_sampler)
    return sampler, suffix or schedule
