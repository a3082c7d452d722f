"""Infotext -> form values for PNG Info's "Send to txt2img/img2img", as A1111's paste does.

Values are converted to the widgets' types and clamped to nothing: a value outside the limits
is left out (the form keeps its current value) and reported, rather than silently changed.
"""

from __future__ import annotations

from pipelines.params import GenerationLimits


def _int(text: object) -> int | None:
    try:
        return int(str(text).strip())
    except ValueError:
        return None


def _float(text: object) -> float | None:
    try:
        return float(str(text).strip())
    except ValueError:
        return None


def infotext_to_form_values(text: str, limits: GenerationLimits, sampler_names: list[str],
                            schedule_names: list[str]) -> tuple[dict[str, object], list[str]]:
    """(field -> value for `GenerationWidgets` fields and "denoising_strength", notes about skipped values)."""
    from pipelines.infotext import parse_infotext
    from pipelines.infotext_samplers import sampler_and_schedule
    from webui.ui.widgets import widget_ranges

    parsed = parse_infotext(text)
    values: dict[str, object] = {"prompt": parsed.get("Prompt", ""), "negative_prompt": parsed.get("Negative prompt", "")}
    notes: list[str] = []
    ranges = widget_ranges(limits)
    numeric = {"steps": ("Steps", _int), "cfg_scale": ("CFG scale", _float), "seed": ("Seed", _int),
               "width": ("Size-1", _int), "height": ("Size-2", _int), "clip_skip": ("Clip skip", _int)}
    for field, (key, convert) in numeric.items():
        if key not in parsed:
            continue
        value = convert(parsed[key])
        spec = ranges[field]
        if value is None or not spec.minimum <= value <= spec.maximum:
            notes.append(f"{key}: {parsed[key]!r} is outside [{spec.minimum}, {spec.maximum}]; kept the current value.")
            continue
        values[field] = value
    sampler, schedule = sampler_and_schedule(parsed)
    if sampler is not None:
        if sampler in sampler_names:
            values["sampler"] = sampler
        else:
            notes.append(f"Sampler {sampler!r} is not available here; kept the current sampler.")
    if schedule in schedule_names:
        values["schedule_type"] = schedule
    strength = _float(parsed.get("Denoising strength", ""))
    if strength is not None and 0 <= strength <= 1:
        values["denoising_strength"] = strength
    for key in ("Skip Early CFG", "NGMS", "NGMS all steps"):  # A1111 pastes these as setting overrides
        if key in parsed:
            notes.append(f"{key}: {parsed[key]} is a setting here (Settings > Optimizations), not a form field; "
                         "set it there to reproduce this image.")
    return values, notes
