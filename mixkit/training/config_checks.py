"""Range checks shared by the trainers' config dataclasses (one message per rule, everywhere)."""

from __future__ import annotations

import math

from mixkit.finite_numbers import is_finite_number

MIXED_PRECISION = ("no", "bf16", "fp16", "auto")  # auto: see accelerator_setup.resolve_mixed_precision


def check_positive_ints(config, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def check_non_negative_numbers(config, names: tuple[str, ...]) -> None:
    """Finite numbers >= 0; None means "not used" and is allowed."""
    for name in names:
        value = getattr(config, name)
        if value is None:
            continue
        if not is_finite_number(value) or value < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def check_bools(config, names: tuple[str, ...]) -> None:
    """Settings that must be exactly true or false (not 1, "yes" or None)."""
    for name in names:
        if not isinstance(getattr(config, name), bool):
            raise TypeError(f"{name} must be true or false, got {getattr(config, name)!r}")


def check_optional_strings(config, names: tuple[str, ...]) -> None:
    """Free-text settings (titles, names): a string, or None to leave it out."""
    for name in names:
        value = getattr(config, name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{name} must be a string (or None to leave it out), got {value!r}")


def check_int_in(config, name: str, low: int, high: int, hint: str = "") -> None:
    """An integer setting in [low, high]; `hint` (like "(0: off)") is added to the message."""
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}..{high}{' ' + hint if hint else ''}, got {value!r}")


def check_number_in(config, name: str, interval: str, hint: str = "") -> None:
    """A number setting in an interval written as in the message: "[0, 1]", "(0, 1]", "[0, 1)" or "[0, inf)"."""
    value = getattr(config, name)
    low, high = (float(bound) for bound in interval[1:-1].split(", "))
    inside = (is_finite_number(value)
              and (low <= value if interval[0] == "[" else low < value)
              and (value <= high if interval[-1] == "]" else value < high))
    if not inside:
        raise ValueError(f"{name} must be a number in {interval}{' ' + hint if hint else ''}, got {value!r}")


def check_ema_decay(config) -> None:
    """`ema_decay` of a trainer with an exponential moving average: a number in [0, 1)."""
    decay = config.ema_decay
    if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0 <= decay < 1:
        raise ValueError(f"ema_decay must be a number in [0, 1) (0.99 averages about the last 100 steps once "
                         f"warmed up, 0.9999 the last 10,000), got {decay!r}")


def check_diffusion_training(config) -> None:
    """The rules every SD trainer shares: resolution, learning rate, min-SNR, precision, schedule."""
    from mixkit.data.bucketing import check_resolution

    check_resolution(config.resolution)
    if config.learning_rate <= 0:
        raise ValueError(f"learning_rate must be > 0, got {config.learning_rate!r}")
    if config.min_snr_gamma is not None and config.min_snr_gamma <= 0:
        raise ValueError(f"min_snr_gamma must be > 0 (5 is the paper's value) or None, got {config.min_snr_gamma!r}")
    check_mixed_precision(config)
    if config.checkpoint_every < 0:
        raise ValueError(f"checkpoint_every must be >= 0 (0: no checkpoints), got {config.checkpoint_every}")
    check_warmup_steps(config)


def check_warmup_steps(config) -> None:
    """`warmup_steps` of an SD trainer: a whole number of steps >= 0, or a ratio of the run's steps in [0, 1), which is
    how kohya reads a float `lr_warmup_steps` (`lr_schedules.resolve_warmup_steps`). Any other float is refused: kohya
    would take 10.0 in its TOML as ten times the run, and 2.5 steps means nothing."""
    value = config.warmup_steps
    is_count = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    is_ratio = isinstance(value, float) and 0.0 <= value < 1.0
    if is_count or is_ratio:
        return
    hint = ""
    if isinstance(value, float) and math.isfinite(value) and value >= 1 and value.is_integer():
        hint = f" (write {int(value)} for {int(value)} steps: kohya reads a float as a ratio of the run's steps)"
    raise ValueError(f"warmup_steps must be a whole number of steps >= 0, or a ratio of the run's steps below 1 as "
                     f"kohya's lr_warmup_steps (0.1: the first 10%), got {value!r}{hint}")


def check_mixed_precision(config) -> None:
    if config.mixed_precision not in MIXED_PRECISION:
        raise ValueError(f"mixed_precision must be one of {MIXED_PRECISION}, got {config.mixed_precision!r}")


def check_caption_files(config) -> None:
    """`missing_captions` (a policy name) and `caption_extension` (kohya's: `.txt`, `.caption`, ...) of a trainer
    that reads kohya folders."""
    from mixkit.data.captions import MISSING_CAPTION_POLICIES
    from mixkit.data.kohya_folder import check_caption_extension

    MISSING_CAPTION_POLICIES.get(config.missing_captions)
    check_caption_extension(config.caption_extension)
