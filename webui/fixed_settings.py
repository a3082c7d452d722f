"""A1111 settings that change the image but that this server runs at one value only (A1111's default).

A1111 writes each of them into the infotext under its option's `infotext=` key (`shared_options.py`:
`s_churn` -> "Sigma churn", `uni_pc_variant` -> "UniPC variant" ...) when it is not at its default, and its
paste and its API's `infotext` field turn the key back into that option (`infotext_utils.get_override_settings`).
mixkit implements none of them beyond their default, so a value is accepted only where it is what runs here
anyway (churn 0, UniPC bh1 order 3, "Discard penultimate sigma: True" for DPM2, which always discards ...);
any other value makes another image and is refused by the API or named in a note by the web UI paste,
never dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from pipelines.samplers.sigma_schedules import BETA_ALPHA, BETA_BETA


def _number(value: Any) -> float:
    """A number from an infotext string ("0.5", "inf") or a JSON number; ValueError for anything else."""
    if isinstance(value, bool):
        raise ValueError(value)
    return float(str(value).strip()) if isinstance(value, str) else float(value)


def _flag(value: Any) -> bool:
    """A flag from an infotext string ("True"/"False", A1111's spelling) or a JSON boolean."""
    if isinstance(value, bool):
        return value
    text = str(value).strip()
    if text not in ("True", "False"):
        raise ValueError(value)
    return text == "True"


def _equals_number(default: float) -> Callable[..., bool]:
    return lambda value, spec, schedule=None: _number(value) == default


def _equals_flag(default: bool) -> Callable[..., bool]:
    return lambda value, spec, schedule=None: _flag(value) is default


def _equals_text(default: str) -> Callable[..., bool]:
    return lambda value, spec, schedule=None: str(value).strip() == default


def _tmax_is_infinite(value: Any, spec, schedule=None) -> bool:
    # A1111 reads s_tmax 0 as infinity (`getattr(opts, 's_tmax', p.s_tmax) or self.s_tmax`, s_tmax = inf).
    return _number(value) in (0.0, math.inf)


def _discard_is_run(value: Any, spec, schedule=None) -> bool:
    # DPM2 and DPM2 a always discard (their `discard_next_to_last_sigma` option); the setting only forces it on others.
    return not _flag(value) or bool(spec is not None and spec.discard_penultimate_sigma)


def _rho_is_run(value: Any, spec, schedule=None) -> bool:
    # A1111 applies its rho only when `opts.rho != 0 and opts.rho != scheduler.default_rho` (get_sigmas): 0, or the
    # schedule's own rho (Karras 7, Polyexponential 1), runs the schedule as it is.
    rho = _number(value)
    return rho == 0.0 or rho == _schedule_default_rho(spec, schedule)


def _schedule_default_rho(spec, schedule: str | None) -> float | None:
    """The default rho of the schedule that runs (`schedule`, or the sampler's own for "Automatic"/None)."""
    from pipelines.samplers import SCHEDULE_TYPES

    name = spec.default_schedule if spec is not None and schedule in (None, "", "Automatic") else schedule
    if name not in SCHEDULE_TYPES:
        return None
    rho = SCHEDULE_TYPES.get(name).default_rho
    return rho if rho > 0 else None


@dataclass(frozen=True)
class FixedSetting:
    """One A1111 option this server runs at one value: its name, its infotext keys, and what runs here."""

    option: str  # A1111's option name, as `override_settings` takes it
    infotext_keys: tuple[str, ...]  # the keys A1111 writes it under (older versions had other spellings)
    section: str  # where A1111's Settings show it
    runs: str  # the value this server runs, in words, for messages
    # (value, resolved SamplerSpec or None, schedule type name or None) -> whether the value is what runs here;
    # ValueError for a value that does not read as the option's type
    is_run: Callable[..., bool]
    value: str | None = None  # the value to set it to, when it is not the first word of `runs`

    def accepts(self, value: Any, spec=None, schedule: str | None = None) -> bool:
        """True when `value` is what this server runs for it with the sampler `spec` and `schedule`; False else."""
        try:
            return bool(self.is_run(value, spec, schedule))
        except (ValueError, TypeError, OverflowError):
            return False


SAMPLER_PARAMETERS = "Settings > Sampler parameters"
FIXED_SETTINGS: tuple[FixedSetting, ...] = (
    FixedSetting("s_churn", ("Sigma churn",), SAMPLER_PARAMETERS, "0 (no churn)", _equals_number(0.0)),
    FixedSetting("s_tmin", ("Sigma tmin",), SAMPLER_PARAMETERS, "0", _equals_number(0.0)),
    FixedSetting("s_tmax", ("Sigma tmax",), SAMPLER_PARAMETERS, "0 (infinity)", _tmax_is_infinite),
    FixedSetting("s_noise", ("Sigma noise",), SAMPLER_PARAMETERS, "1", _equals_number(1.0)),
    FixedSetting("sigma_min", ("Schedule min sigma",), SAMPLER_PARAMETERS, "0 (the model's sigma range)",
                 _equals_number(0.0)),
    FixedSetting("sigma_max", ("Schedule max sigma",), SAMPLER_PARAMETERS, "0 (the model's sigma range)",
                 _equals_number(0.0)),
    FixedSetting("rho", ("Schedule rho",), SAMPLER_PARAMETERS, "0 (each schedule's own rho, e.g. Karras 7)", _rho_is_run),
    FixedSetting("beta_dist_alpha", ("Beta schedule alpha",), SAMPLER_PARAMETERS, str(BETA_ALPHA),
                 _equals_number(BETA_ALPHA)),
    FixedSetting("beta_dist_beta", ("Beta schedule beta",), SAMPLER_PARAMETERS, str(BETA_BETA),
                 _equals_number(BETA_BETA)),
    FixedSetting("always_discard_next_to_last_sigma", ("Discard penultimate sigma",), SAMPLER_PARAMETERS,
                 "False (True only with DPM2 and DPM2 a, which always discard it)", _discard_is_run),
    # A1111 1.6 wrote the key misspelt ("multplier"); later versions spell it right. Both circulate.
    FixedSetting("sgm_noise_multiplier", ("SGM noise multiplier", "SGM noise multplier"), SAMPLER_PARAMETERS,
                 "False", _equals_flag(False)),
    FixedSetting("uni_pc_variant", ("UniPC variant",), SAMPLER_PARAMETERS, "bh1", _equals_text("bh1")),
    FixedSetting("uni_pc_skip_type", ("UniPC skip type",), SAMPLER_PARAMETERS, "time_uniform",
                 _equals_text("time_uniform")),
    FixedSetting("uni_pc_order", ("UniPC order",), SAMPLER_PARAMETERS, "3", _equals_number(3.0)),
    FixedSetting("uni_pc_lower_order_final", ("UniPC lower order final",), SAMPLER_PARAMETERS, "True",
                 _equals_flag(True)),
    FixedSetting("sd_noise_schedule", ("Noise Schedule",), SAMPLER_PARAMETERS, "Default (not Zero Terminal SNR)",
                 _equals_text("Default")),
    FixedSetting("initial_noise_multiplier", ("Noise multiplier",), "Settings > img2img", "1",
                 _equals_number(1.0)),
    FixedSetting("img2img_extra_noise", ("Extra noise",), "Settings > img2img", "0", _equals_number(0.0)),
    # A1111's inpainting_image_conditioning lerps an inpainting model's conditioning image between the init image
    # and its masked copy by this weight; here the masked copy is used whole (its default), and every image of an
    # inpainting model records it ("Conditional mask weight: 1.0"), so its own infotext pastes back.
    FixedSetting("inpainting_mask_weight", ("Conditional mask weight",), "Settings > img2img",
                 "1 (an inpainting model's conditioning image fully masked)", _equals_number(1.0)),
    FixedSetting("pad_cond_uncond", ("Pad conds",), "Settings > Optimizations",
                 "False (prompt and negative prompt not padded to each other)", _equals_flag(False)),
    FixedSetting("use_downcasted_alpha_bar", ("Downcast alphas_cumprod",), "Settings > Compatibility",
                 "False (alphas_cumprod kept in float32)", _equals_flag(False)),
    # With hires fix, the refiner (pipelines.refiner) finishes the hires pass only, A1111's default.
    FixedSetting("hires_fix_refiner_pass", ("Hires refiner",), "Settings > Stable Diffusion",
                 "'second pass' (with hires fix, the refiner finishes the hires pass only)",
                 _equals_text("second pass"), value="second pass"),
)
FIXED_BY_OPTION = {setting.option: setting for setting in FIXED_SETTINGS}
FIXED_BY_INFOTEXT_KEY = {key: setting for setting in FIXED_SETTINGS for key in setting.infotext_keys}


def infotext_fixed_settings(written: dict[str, object]) -> dict[str, tuple[str, object]]:
    """option -> (infotext key, value) for each fixed setting the infotext's own keys (no defaults added) record."""
    return {FIXED_BY_INFOTEXT_KEY[key].option: (key, value) for key, value in written.items()
            if key in FIXED_BY_INFOTEXT_KEY}


def fixed_setting_refusal(option: str, value: object, spec=None, schedule: str | None = None) -> str | None:
    """Why `value` for the fixed option `option` cannot be honoured here (None when it is what runs anyway).

    The message names the option, its infotext key and A1111's Settings section, says what this server runs,
    and what to do."""
    setting = FIXED_BY_OPTION[option]
    if setting.accepts(value, spec, schedule):
        return None
    keys = " / ".join(repr(key) for key in setting.infotext_keys)
    sampler = f" with sampler {spec.name}" if spec is not None and option == "always_discard_next_to_last_sigma" else ""
    return (f"{option}={value!r} (A1111's {setting.section}; infotext key {keys}): this server always runs "
            f"{setting.runs}{sampler}, so the image would differ; remove the key from the infotext or "
            f"override_settings (or set it to {setting.value or setting.runs.split(' ')[0]}) to generate without it")
