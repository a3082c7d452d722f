"""A1111 settings that change the image but that this server runs at one value only (A1111's default).

A1111 writes each of them into the infotext under its option's `infotext=` key (`shared_options.py`:
`uni_pc_variant` -> "UniPC variant", `pad_cond_uncond` -> "Pad conds" ...) when it is not at its default, and its
paste and its API's `infotext` field turn the key back into that option (`infotext_utils.get_override_settings`).
mixkit implements none of them beyond their default, so a value is accepted only where it is what runs here
anyway (UniPC bh1 order 3, "Pad conds: False" ...);
any other value makes another image and is refused by the API or named in a note by the web UI paste,
never dropped.
"""

from __future__ import annotations

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
# Schedule min/max sigma, rho, churn (s_churn, s_tmin, s_tmax, s_noise) and "Discard penultimate sigma" run at any
# value, as does "SGM noise multiplier" (`pipelines.sampler_parameters`), and so do img2img's "Noise multiplier" and
# "Extra noise" (`pipelines.img2img_noise`).
FIXED_SETTINGS: tuple[FixedSetting, ...] = (
    FixedSetting("beta_dist_alpha", ("Beta schedule alpha",), SAMPLER_PARAMETERS, str(BETA_ALPHA),
                 _equals_number(BETA_ALPHA)),
    FixedSetting("beta_dist_beta", ("Beta schedule beta",), SAMPLER_PARAMETERS, str(BETA_BETA),
                 _equals_number(BETA_BETA)),
    FixedSetting("uni_pc_variant", ("UniPC variant",), SAMPLER_PARAMETERS, "bh1", _equals_text("bh1")),
    FixedSetting("uni_pc_skip_type", ("UniPC skip type",), SAMPLER_PARAMETERS, "time_uniform",
                 _equals_text("time_uniform")),
    FixedSetting("uni_pc_order", ("UniPC order",), SAMPLER_PARAMETERS, "3", _equals_number(3.0)),
    FixedSetting("uni_pc_lower_order_final", ("UniPC lower order final",), SAMPLER_PARAMETERS, "True",
                 _equals_flag(True)),
    FixedSetting("sd_noise_schedule", ("Noise Schedule",), SAMPLER_PARAMETERS, "Default (not Zero Terminal SNR)",
                 _equals_text("Default")),
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
    return (f"{option}={value!r} (A1111's {setting.section}; infotext key {keys}): this server always runs "
            f"{setting.runs}, so the image would differ; remove the key from the infotext or "
            f"override_settings (or set it to {setting.value or setting.runs.split(' ')[0]}) to generate without it")
