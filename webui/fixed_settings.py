"""A1111 settings that change the image but that this server runs at one value only (A1111's default).

A1111 writes each of them into the infotext under its option's `infotext=` key (`shared_options.py`:
`hires_fix_refiner_pass` -> "Hires refiner") when it is not at its default, and its
paste and its API's `infotext` field turn the key back into that option (`infotext_utils.get_override_settings`).
mixkit implements none of them beyond their default, so a value is accepted only where it is what runs here
anyway ("Hires refiner: second pass");
any other value makes another image and is refused by the API or named in a note by the web UI paste,
never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


def _number(value: Any) -> float:
    """A number from an infotext string ("0.5", "inf") or a JSON number; ValueError for anything else."""
    if isinstance(value, bool):
        raise ValueError(value)
    return float(str(value).strip()) if isinstance(value, str) else float(value)


def _equals_number(default: float) -> Callable[..., bool]:
    return lambda value, spec, schedule=None: _number(value) == default


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


# Every Settings > Sampler parameters option runs at any value (`pipelines.sampler_parameters`: schedule bounds, rho,
# churn, discard penultimate sigma, SGM noise multiplier, Beta alpha/beta, UniPC options, noise schedule), and so do
# "Pad prompt/negative prompt" (v0 too) and "Downcast alphas_cumprod", img2img's "Noise multiplier" and
# "Extra noise" (`pipelines.img2img_noise`) and "Inpainting conditioning mask strength" (`inpainting_mask_weight`).
FIXED_SETTINGS: tuple[FixedSetting, ...] = (
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
