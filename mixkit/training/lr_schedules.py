"""Learning-rate schedules by name (kohya's --lr_scheduler set): a linear warm-up, then the named curve.

Every mixkit trainer steps one LambdaLR per optimizer step. The curves are diffusers' / transformers'
get_*_schedule_with_warmup (what kohya's get_scheduler_fix calls), term for term, so a kohya config's
--lr_scheduler, --lr_scheduler_num_cycles, --lr_scheduler_power and --lr_scheduler_args give the same rate at
every step; kohya's "adafactor" reports the step size a relative-step Adafactor picks itself.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Callable

import torch

from mixkit.registry import Registry

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScheduleShape:
    """The knobs of the schedules that have them: kohya's --lr_scheduler_num_cycles (cosine_with_restarts) and
    --lr_scheduler_power (polynomial), and the polynomial's floor as a fraction of the base rate."""

    num_cycles: int = 1
    power: float = 1.0
    end_factor: float = 0.0
    # the plain cosine's cycles (transformers' get_cosine_schedule_with_warmup num_cycles, kohya's
    # --lr_scheduler_args "num_cycles=..."): 0.5 is half a wave, from the full rate down to 0 at the last step
    cosine_cycles: float = 0.5


# diffusers' get_polynomial_decay_schedule_with_warmup (what kohya's "polynomial" calls) decays to lr_end = 1e-7.
POLYNOMIAL_END_LR = 1e-7


def resolve_warmup_steps(warmup_steps: int | float, total_steps: int) -> int:
    """The warm-up in optimizer steps: an integer is a count; a float (below 1, see `config_checks.check_warmup_steps`)
    is kohya's ratio of the run's steps (`lr_warmup_steps = 0.1`: the first 10%), rounded down as kohya's
    get_scheduler_fix rounds it (`int(ratio * max_train_steps)`; that is kohya on one process: with P processes kohya
    multiplies both by P and steps its scheduler P times a step, so its warm-up is int(ratio * steps * P) / P)."""
    if isinstance(warmup_steps, float):
        return int(warmup_steps * total_steps)
    return warmup_steps


def warmup_schedule(optimizer: torch.optim.Optimizer, schedule: str, warmup_steps: int | float,
                    total_steps: int, *, num_cycles: int = 1, power: float = 1.0,
                    schedule_args: dict | None = None, initial_lr: float = 0.0) -> torch.optim.lr_scheduler.LambdaLR:
    """The LambdaLR every mixkit trainer steps once per optimizer step: `warmup_then` for each step.

    `warmup_steps` is a count, or kohya's ratio of `total_steps` (`resolve_warmup_steps`). The polynomial's floor is
    1e-7 in absolute terms, as diffusers' (so kohya's), or `schedule_args["lr_end"]`: a fraction of the optimizer's
    base rate, applied to every parameter group alike, as diffusers does. `schedule_args` are kohya's
    --lr_scheduler_args (`check_schedule_args`). `initial_lr` is what "adafactor" reports before the first step (kohya
    passes its learning_rate)."""
    LR_SCHEDULES.get(schedule)  # an unknown name fails here, listing the known ones, not at the first step
    schedule_args = schedule_args or {}
    check_schedule_args(schedule, schedule_args)
    if schedule == "adafactor":
        return adafactor_schedule(optimizer, warmup_steps, initial_lr)
    if isinstance(warmup_steps, float):
        resolved = resolve_warmup_steps(warmup_steps, total_steps)
        logger.info("warmup_steps=%r is a ratio of the run's %d steps (kohya's lr_warmup_steps): %d warm-up steps",
                    warmup_steps, total_steps, resolved)
        warmup_steps = resolved
    end_lr = schedule_args.get("lr_end", POLYNOMIAL_END_LR)
    shape = ScheduleShape(num_cycles, power, end_lr / optimizer.defaults["lr"] if schedule == "polynomial" else 0.0,
                          schedule_args.get("num_cycles", 0.5))
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: warmup_then(schedule, s, warmup_steps, total_steps, shape))


# Learning-rate factor per optimizer step after warm-up, as f(progress in [0, 1], shape).
LR_SCHEDULES: Registry[Callable[[float, ScheduleShape], float]] = Registry("learning-rate schedule")
# mixkit's "constant" keeps the warm-up (kohya's "constant" refuses an lr_warmup_steps; its "constant_with_warmup"
# is this one).
LR_SCHEDULES.register("constant", lambda progress, shape: 1.0)
LR_SCHEDULES.register("constant_with_warmup", lambda progress, shape: 1.0)
# LAVIS's `linear_warmup_cosine_lr` (BLIP-2's schedule) decays to its min_lr; 0 here, as in its stage-2 configs
# where min_lr is 1e-5 against an init_lr of 1e-4 (close enough to 0 that the end matters little).
# With `cosine_cycles` (kohya's lr_scheduler_args num_cycles) it is transformers' cosine, term for term; 0 where the
# wave would go below it.
LR_SCHEDULES.register("cosine", lambda progress, shape: max(
    0.0, 0.5 * (1.0 + math.cos(math.pi * float(shape.cosine_cycles) * 2.0 * min(1.0, progress)))))
# kohya's and diffusers' `linear`: straight down to 0 at the last step.
LR_SCHEDULES.register("linear", lambda progress, shape: max(0.0, 1.0 - progress))


# kohya's "adafactor": Adafactor with relative_step chooses each step's size itself; the schedule only reports it
# (transformers' AdafactorSchedule, which kohya's get_scheduler_fix returns). See `adafactor_schedule`.
LR_SCHEDULES.register("adafactor", lambda progress, shape: 1.0)


def adafactor_schedule(optimizer: torch.optim.Optimizer, warmup_steps: int | float, initial_lr: float = 0.0):
    """transformers' AdafactorSchedule over an Adafactor that picks its own step size, as kohya's lr_scheduler
    "adafactor"; its get_last_lr() is Adafactor's step size of each group. Refused, as kohya refuses it, with a
    warm-up or any other optimizer. Before the first step it reports `initial_lr` (kohya's "adafactor:<learning_rate>"
    scheduler passes its learning_rate)."""
    from transformers.optimization import Adafactor, AdafactorSchedule

    if not isinstance(optimizer, Adafactor) or not optimizer.defaults.get("relative_step"):
        raise ValueError("lr_schedule='adafactor' reports the step size Adafactor picks itself: it needs "
                         "optimizer='adafactor' without optimizer_args relative_step=False (kohya: adafactor scheduler "
                         "must be used with Adafactor optimizer)")
    if warmup_steps:
        raise ValueError(f"lr_schedule='adafactor' takes no warm-up (kohya: adafactor does not require "
                         f"`num_warmup_steps`), got warmup_steps={warmup_steps!r}; set it to 0, or warmup_init=True in "
                         "optimizer_args for Adafactor's own warm-up")
    return AdafactorSchedule(optimizer, initial_lr)


@LR_SCHEDULES.register("cosine_with_restarts")
def cosine_with_hard_restarts(progress: float, shape: ScheduleShape) -> float:
    """kohya's cosine_with_restarts (diffusers' hard restarts): `num_cycles` cosine decays, each from the full rate
    to 0 and back up at once; 0 from the last step on."""
    if progress >= 1.0:
        return 0.0
    return 0.5 * (1.0 + math.cos(math.pi * ((shape.num_cycles * progress) % 1.0)))


@LR_SCHEDULES.register("polynomial")
def polynomial_decay(progress: float, shape: ScheduleShape) -> float:
    """kohya's polynomial (diffusers' polynomial decay): (1 - progress) ** power from the full rate down to the
    floor `end_factor`, which it keeps after the last step; power 1 is linear."""
    remaining = max(0.0, 1.0 - progress)
    return (1.0 - shape.end_factor) * remaining ** shape.power + shape.end_factor


# kohya's --lr_scheduler_args: keyword arguments its get_scheduler_fix passes on to transformers' schedule function,
# by schedule; what each function takes beyond what mixkit sets itself (warm-up, steps, and num_cycles / power from
# lr_schedule_num_cycles / lr_schedule_power, which kohya passes explicitly, so its --lr_scheduler_args cannot).
SCHEDULE_ARGS = {"cosine": {"num_cycles": "the cosine's waves over the run (0.5: down to 0 once; 1: down and back up)"},
                 "polynomial": {"lr_end": "the rate it decays to (1e-7 by default)"}}


def check_schedule_args(schedule: str, schedule_args) -> None:
    """Refuse `schedule_args` (kohya's --lr_scheduler_args as a mapping) the schedule does not take, naming the ones
    it does, and values that are not positive numbers; `last_epoch` is refused as resume_from's business."""
    if not isinstance(schedule_args, dict) or not all(isinstance(key, str) for key in schedule_args):
        raise TypeError(f"lr_schedule_args must map setting names to values (kohya's list [\"num_cycles=1\"] is "
                        f"translated to one), got {schedule_args!r}")
    if "last_epoch" in schedule_args:
        raise ValueError("lr_schedule_args last_epoch: the schedule's position comes from resume_from (a checkpoint "
                         "restores it); remove last_epoch")
    accepted = SCHEDULE_ARGS.get(schedule, {})
    for key, value in schedule_args.items():
        if key not in accepted:
            takes = "; ".join(f"{name}: {why}" for name, why in accepted.items()) or "none"
            raise ValueError(f"lr_schedule_args {key!r} is not a setting of lr_schedule={schedule!r} (it takes: "
                             f"{takes}). lr_schedule_num_cycles and lr_schedule_power are settings of their own.")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise ValueError(f"lr_schedule_args {key}={value!r} must be a positive number")


def warmup_then(schedule: str, step: int, warmup_steps: int, total_steps: int,
                shape: ScheduleShape = ScheduleShape()) -> float:
    """LR factor at `step` (0-based): linear warm-up over `warmup_steps`, then the named schedule.

    The warm-up is diffusers' `get_*_schedule_with_warmup` (which kohya calls): step s runs at s / warmup_steps of
    the rate, so the first step runs at 0 and the full rate comes at step `warmup_steps`. (mixkit used (s + 1) /
    warmup_steps, one step ahead of kohya's curve for the same config.)"""
    if step < warmup_steps:
        return step / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return LR_SCHEDULES.get(schedule)(progress, shape)
