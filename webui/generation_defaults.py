"""Sampler defaults from Settings: what an API request that omits a field gets, and what the UI starts with.

A1111 keeps these in its UI config (`txt2img/Sampling steps/value`, ...) and its API models carry
their own constants, so an API client and the UI can disagree. Here one set of values, settable
through `POST /sdapi/v1/options`, serves both; a field the request states explicitly still wins.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from pipelines.params import GenerationLimits, Txt2ImgParams, check_txt2img_params

_START = Txt2ImgParams()


@dataclass(frozen=True)
class GenerationDefaults:
    """Values for fields a request leaves out; starts at A1111's UI defaults (`Txt2ImgParams`)."""

    sampler: str = _START.sampler
    schedule_type: str = _START.schedule_type
    steps: int = _START.steps
    cfg_scale: float = _START.cfg_scale
    width: int = _START.width
    height: int = _START.height


# Option key (`/sdapi/v1/options`) -> GenerationDefaults field. A1111 has no option keys for these
# (its values live in ui-config.json), so the keys are named after the API request fields.
OPTION_KEYS = {
    "default_sampler_name": "sampler",
    "default_scheduler": "schedule_type",
    "default_steps": "steps",
    "default_cfg_scale": "cfg_scale",
    "default_width": "width",
    "default_height": "height",
}
# Request field(s) -> GenerationDefaults field, for requests that omit them.
REQUEST_FIELDS = {"steps": "steps", "cfg_scale": "cfg_scale", "width": "width", "height": "height"}


def check_option_value(key: str, value) -> object:
    """The type check for one option; ranges are checked together by `check_generation_defaults`."""
    field = OPTION_KEYS[key]
    if field in ("sampler", "schedule_type"):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{key} must be a name (string), got {value!r}.")
        return value.strip()
    if field == "cfg_scale":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{key} must be a number, got {value!r}.")
        return float(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} must be an integer, got {value!r}.")
    return value


def check_generation_defaults(defaults: GenerationDefaults, limits: GenerationLimits) -> None:
    """Refuse defaults a request could not use: the same checks as a request's own values, named by option key."""
    from pipelines.samplers import list_samplers, resolve_sampler
    from pipelines.samplers.schedule_types import SCHEDULE_TYPES

    keys = {field: key for key, field in OPTION_KEYS.items()}
    # Exact names only (no aliases such as "k_euler"): the UI's dropdowns must be able to show the value.
    samplers = [item["name"] for item in list_samplers()]
    if defaults.sampler not in samplers:
        raise ValueError(f"{keys['sampler']}={defaults.sampler!r} is not a sampler name; valid: {', '.join(samplers)}.")
    if defaults.schedule_type not in SCHEDULE_TYPES.names():
        raise ValueError(f"{keys['schedule_type']}={defaults.schedule_type!r} is not a schedule type; "
                         f"valid: {', '.join(SCHEDULE_TYPES.names())}.")
    try:
        resolve_sampler(defaults.sampler, defaults.schedule_type)
    except (ValueError, TypeError, KeyError) as error:
        message = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
        raise ValueError(f"{keys['sampler']}/{keys['schedule_type']}: {message}") from None
    params = Txt2ImgParams(**{f.name: getattr(defaults, f.name) for f in fields(GenerationDefaults)})
    try:
        check_txt2img_params(params, limits)
    except (ValueError, TypeError) as error:
        names = ", ".join(keys.values())
        raise ValueError(f"Generation defaults ({names}): {error}") from None


def defaults_from_options(values: dict) -> GenerationDefaults:
    return GenerationDefaults(**{field: values[key] for key, field in OPTION_KEYS.items()})


def options_from_defaults(defaults: GenerationDefaults) -> dict:
    return {key: getattr(defaults, field) for key, field in OPTION_KEYS.items()}


def apply_request_defaults(request, defaults: GenerationDefaults) -> dict:
    """{sampler, schedule_type, steps, cfg_scale, width, height} for a pydantic request: explicit fields win.

    `model_fields_set` tells "omitted" from "sent with A1111's default value", which the field
    defaults alone cannot. An explicit `null` sampler or scheduler counts as omitted.
    """
    sent = request.model_fields_set
    values = {field: (getattr(request, name) if name in sent else getattr(defaults, field))
              for name, field in REQUEST_FIELDS.items()}
    sampler = request.sampler_name if "sampler_name" in sent else None
    if not sampler and "sampler_index" in sent:
        sampler = request.sampler_index
    values["sampler"] = sampler or defaults.sampler
    schedule = request.scheduler if "scheduler" in sent else None
    if not schedule:
        schedule = defaults.schedule_type
        if sampler and not _schedule_applies(sampler, schedule):
            # The Settings default (say Karras, chosen for DPM++ 2M) must not make a request that names another
            # sampler (DDIM, UniPC) fail: that sampler gets its own default schedule, as "Automatic" means.
            schedule = "Automatic"
    values["schedule_type"] = schedule
    return values


def _schedule_applies(sampler: str, schedule: str) -> bool:
    from pipelines.samplers import resolve_sampler

    try:
        _, resolved = resolve_sampler(sampler, schedule)
    except (ValueError, KeyError):
        return False
    # A sampler without schedule choice (DDIM, UniPC) runs a given schedule as "Automatic", which it then is.
    return resolved == schedule or schedule == "Automatic"
