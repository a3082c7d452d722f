"""The hires pass's own sampler and schedule type (A1111 1.10's `hr_sampler_name` / `hr_scheduler`).

A1111 runs its hires pass with `hr_sampler_name or sampler_name` and `hr_scheduler or scheduler`; its UI's "Use same
sampler" / "Use same scheduler" (and the API's empty string or null) mean the first pass's. Here `HiresParams.hr_sampler`
/ `hr_schedule_type` None is that. The schedule falls back to the first pass's *requested* schedule (not its resolved
one), so "Automatic" after a first pass on Automatic is the hires sampler's own default, as in A1111.

Everything the first pass's code derives from a sampler is derived again for the hires sampler by the same functions
(`resolve_sampler`, `sampler_eta`, `check_sampler_parameters_for`): its sigmas, its eta (`hr_eta`, or `eta`, or the
sampler's default), and whether ENSD and the churn / s_noise settings apply to it.

Infotext: A1111 writes `Hires sampler: X` when the hires sampler differs from the first pass's (processing.py's
txt2img `init`). `Hires schedule type: Y` comes from its `sd_samplers_kdiffusion.get_sigmas`, which records a
schedule only when it runs one of its schedule functions: never for its timestep samplers (DDIM, PLMS, UniPC) nor
for "Automatic" on a sampler without a schedule option (Euler, Euler a, LMS, Heun, DPM fast / adaptive, which then
step on the model's own sigmas, mixkit's "Uniform"); the hires pass writes its label when it differs from the
first pass's recorded one (`recorded_schedule`). One deliberate exception: where A1111 records nothing but its
paste ("Use same scheduler" = the first pass's *requested* schedule) would run another schedule (DPM++ 2M Karras
first, Euler a on Automatic in the hires pass), the resolved label is written, so the image can be made again, in
A1111 too. The hires pass's eta is written as A1111's hires sampler writes it: under its own kind's key (`Eta` or
`Eta DDIM`) when it is not that sampler's default, over the first pass's value of the same key
(`pipelines.hires.with_second_pass_extras` takes it from the second pass's infotext).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# A1111's UI labels for "the first pass's" (its dropdowns' first entries).
SAME_SAMPLER, SAME_SCHEDULER = "Use same sampler", "Use same scheduler"
SAMPLER_KEY, SCHEDULE_KEY = "Hires sampler", "Hires schedule type"


def same_as_first(value: Any, same_label: str) -> bool:
    """Whether a hires sampler / schedule value means "the first pass's": None, "" or A1111's "Use same ..." label."""
    return value is None or (isinstance(value, str) and value.strip() in ("", same_label))


def hires_sampler_choice(sampler: Any, schedule_type: Any) -> tuple[str | None, str | None]:
    """(hr_sampler, hr_schedule_type) with A1111's "same" spellings turned into None; the rest as given."""
    return (None if same_as_first(sampler, SAME_SAMPLER) else sampler,
            None if same_as_first(schedule_type, SAME_SCHEDULER) else schedule_type)


def hires_sampler_names(params) -> tuple[str, str]:
    """The (sampler, schedule type) names the hires pass runs, before resolution: its own or the first pass's.

    An old-style hires sampler name carrying its schedule ("DPM++ 2M Karras") with no hires schedule runs that
    schedule, as A1111's `get_hr_sampler_and_scheduler` splits it, not the first pass's."""
    from pipelines.samplers import find_sampler

    sampler = params.sampler if params.hr_sampler is None else params.hr_sampler
    if params.hr_schedule_type is not None:
        return sampler, params.hr_schedule_type
    if params.hr_sampler is not None and find_sampler(params.hr_sampler.strip()) is None:
        return sampler, "Automatic"  # the name implies its schedule (or is unknown: resolve_sampler says so)
    return sampler, params.schedule_type


@dataclass(frozen=True)
class SettingsEta:
    """A1111's two Settings etas, `eta_ancestral` (the k-diffusion samplers with an eta) and `eta_ddim` (DDIM, DDIM
    CFG++), as a call without a request `eta` ran under them.

    A1111's sampler reads `p.eta`, else its own kind's option, when its pass starts; so a hires sampler chosen after
    the request was read (an X/Y/Z "Hires sampler" cell) takes its kind's Settings eta, which `hires_eta` finds
    here. None on `HiresParams.settings_eta`: the call sent `eta` (it serves both passes) or has no Settings."""

    ancestral: float = 1.0
    ddim: float = 0.0

    def __post_init__(self) -> None:
        for name in ("ancestral", "ddim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ValueError(f"SettingsEta.{name} (A1111's eta_{name}) must be a number in [0, 1], got {value!r}.")

    def for_sampler(self, sampler: str) -> float | None:
        """The Settings eta `sampler` reads; None when it has no eta."""
        from pipelines.samplers import resolve_sampler

        spec = resolve_sampler(sampler)[0]
        if spec.eta_default is None:
            return None
        return self.ddim if spec.eta_infotext_key == "Eta DDIM" else self.ancestral


def hires_eta(params) -> float | None:
    """The eta the hires pass asks for: `hr_eta`; else, for a hires sampler of its own, its kind's Settings eta
    (`settings_eta`, when the call had Settings and sent no eta); else `eta` (A1111's `p.eta` holds for both passes).
    None: the hires sampler's default. A sampler without eta ignores it (`sampler_eta`), as the first pass does."""
    if params.hr_eta is not None:
        return params.hr_eta
    settings = getattr(params, "settings_eta", None)
    if settings is not None and params.hr_sampler is not None:
        return settings.for_sampler(params.hr_sampler)
    return params.eta


def check_hires_sampler(params, steps: int) -> None:
    """Refuse a hires sampler / schedule type / eta the hires pass could not run, before the first pass starts.

    `steps` is the hires pass's step count. Unknown names list the valid ones (the sampler registry's message)."""
    from pipelines.sampler_parameters import check_sampler_parameters_for
    from pipelines.samplers import check_sampler_steps, resolve_sampler, sampler_eta

    for name, value in (("hr_sampler", params.hr_sampler), ("hr_schedule_type", params.hr_schedule_type)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a sampler name or None (= the first pass's), got "
                            f"{type(value).__name__} {value!r}.")
    settings = getattr(params, "settings_eta", None)
    if settings is not None and not isinstance(settings, SettingsEta):
        raise TypeError(f"settings_eta must be a SettingsEta (A1111's eta_ancestral / eta_ddim) or None, got "
                        f"{type(settings).__name__} {settings!r}.")
    if params.hr_sampler is None and params.hr_schedule_type is None and params.hr_eta is None:
        return  # the first pass's checks cover it
    sampler, schedule = hires_sampler_names(params)
    try:
        resolve_sampler(sampler, schedule)
        check_sampler_steps(sampler, steps)
        sampler_eta(sampler, hires_eta(params))
        check_sampler_parameters_for(params.sampler_parameters, sampler, schedule)
    except (KeyError, ValueError) as error:
        given = ", ".join(f"{name}={value!r}" for name, value in (
            ("hr_sampler", params.hr_sampler), ("hr_schedule_type", params.hr_schedule_type),
            ("hr_eta", params.hr_eta)) if value is not None)
        message = error.args[0] if isinstance(error, KeyError) and error.args else str(error)
        raise ValueError(f"The hires pass's sampler ({given}) is not usable: {message} (leave hr_sampler / "
                         f"hr_schedule_type out to use the first pass's).") from None


def hires_sampler_fields(params) -> dict[str, Any]:
    """The second pass's `sampler`, `schedule_type` and `eta`."""
    sampler, schedule = hires_sampler_names(params)
    return {"sampler": sampler, "schedule_type": schedule, "eta": hires_eta(params)}


def recorded_schedule(sampler: str, schedule_type: str) -> str | None:
    """The schedule label A1111's `get_sigmas` records for a pass running `sampler` on `schedule_type`; None where it
    records none: a timestep sampler (its schedule types are only "Automatic"), or "Automatic" on a sampler with no
    schedule option of its own, whose default here is "Uniform" (A1111 then takes the model's own sigmas, which
    "Uniform" reproduces). An old-style name ("Euler Karras") names its schedule, so it is recorded."""
    from pipelines.samplers import find_sampler, get_schedule_type, resolve_sampler

    spec, resolved = resolve_sampler(sampler, schedule_type)
    if spec.schedule_types == ("Automatic",):
        return None
    named = get_schedule_type(schedule_type).name != "Automatic" or find_sampler(sampler.strip()) is None
    if not named and spec.default_schedule == "Uniform":
        return None
    return resolved


def _hires_schedule_key(params) -> str | None:
    """`Hires schedule type`'s value (see the module docstring), None when not written."""
    from pipelines.samplers import resolve_sampler

    sampler, schedule = hires_sampler_names(params)
    recorded = recorded_schedule(sampler, schedule)
    if recorded is not None:
        return recorded if recorded != recorded_schedule(params.sampler, params.schedule_type) else None
    spec, resolved = resolve_sampler(sampler, schedule)
    if spec.schedule_types == ("Automatic",):
        return None  # a timestep sampler runs no schedule type: any paste runs it the same
    # A1111's paste of no key runs the first pass's requested schedule: written when that is not what ran
    try:
        pasted = resolve_sampler(sampler, params.schedule_type)[1]
    except ValueError:
        pasted = None  # the first pass's schedule does not apply to the hires sampler: the paste could not run it
    return resolved if pasted != resolved else None


def hires_sampler_infotext(params) -> dict[str, Any]:
    """A1111's `Hires sampler` / `Hires schedule type` (None: not written; the module docstring has the rule). The
    sampler is written under its registry name, the schedule as its resolved label."""
    if params.hr_sampler is None and params.hr_schedule_type is None:
        return {SAMPLER_KEY: None, SCHEDULE_KEY: None}
    from pipelines.samplers import resolve_sampler

    first_spec = resolve_sampler(params.sampler, params.schedule_type)[0]
    hires_spec = resolve_sampler(*hires_sampler_names(params))[0]
    return {SAMPLER_KEY: hires_spec.name if hires_spec.name != first_spec.name else None,
            SCHEDULE_KEY: _hires_schedule_key(params)}


def hires_sampler_from_infotext(written: dict[str, Any]) -> tuple[str | None, str | None]:
    """(hr_sampler, hr_schedule_type) from an infotext's keys, as A1111's `get_hr_sampler_and_scheduler` reads them:
    missing or "Use same ..." is None; an old-style "Hires sampler: DPM++ 2M Karras" carries its schedule, which
    `resolve_sampler` splits off when the pass runs."""
    return hires_sampler_choice(written.get(SAMPLER_KEY), written.get(SCHEDULE_KEY))
