"""kohya's constant_with_warmup, cosine_with_restarts and polynomial schedules, and its ", " caption rejoining
(hunt finding 12). kohya's `get_scheduler_fix` hands these names to diffusers' `get_scheduler` with
--lr_scheduler_num_cycles / --lr_scheduler_power, so diffusers' own schedules are the oracle here."""

from __future__ import annotations

import random

import pytest
import torch

from mixkit.data.caption_augmentation import CaptionAugmentation, augment_caption
from mixkit.training.lr_schedules import warmup_schedule
from mixkit.training.sd_lora_config import SDLoraTrainingConfig


def _rates(schedule, steps: int) -> list[float]:
    rates = []
    for _ in range(steps):
        rates.append(schedule.get_last_lr()[0])
        schedule.optimizer.step()
        schedule.step()
    return rates


def _optimizer(lr: float = 1e-3):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)


@pytest.mark.parametrize("name, options, diffusers_kwargs", [
    ("cosine_with_restarts", {"num_cycles": 3}, {"num_cycles": 3}),
    ("cosine_with_restarts", {}, {}),
    ("polynomial", {"power": 2.0}, {"power": 2.0}),
    ("polynomial", {}, {}),
])
def test_kohyas_schedules_are_diffusers_own(name, options, diffusers_kwargs):
    from diffusers.optimization import get_scheduler

    for warmup in (0, 1, 3):
        ours = _rates(warmup_schedule(_optimizer(), name, warmup, 12, **options), 15)
        theirs = _rates(get_scheduler(name, _optimizer(), num_warmup_steps=warmup, num_training_steps=12,
                                      **diffusers_kwargs), 15)
        assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-15)


# (mixkit's name, diffusers' name): mixkit's "constant" keeps the warm-up, so it is diffusers' constant_with_warmup.
WARMED_UP = [("constant", "constant_with_warmup"), ("constant_with_warmup", "constant_with_warmup"),
             ("cosine", "cosine"), ("linear", "linear"), ("cosine_with_restarts", "cosine_with_restarts"),
             ("polynomial", "polynomial")]


@pytest.mark.parametrize("ours_name, theirs_name", WARMED_UP)
@pytest.mark.parametrize("warmup", [1, 4, 9])
def test_the_warm_up_is_diffusers_own_step_for_step(ours_name, theirs_name, warmup):
    # diffusers' get_*_schedule_with_warmup (what kohya's get_scheduler_fix calls): step s of the warm-up runs at
    # s / warmup of the rate, so the first optimizer step runs at 0. mixkit's used to run one step ahead.
    from diffusers.optimization import get_scheduler

    ours = _rates(warmup_schedule(_optimizer(1.0), ours_name, warmup, 10), 11)
    theirs = _rates(get_scheduler(theirs_name, _optimizer(1.0), num_warmup_steps=warmup, num_training_steps=10), 11)
    assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-15)
    assert ours[0] == 0.0


@pytest.mark.parametrize("ratio, total, steps", [(0.1, 20, 2), (0.25, 10, 2), (0.5, 3, 1), (0.05, 10, 0)])
def test_a_fractional_warm_up_is_kohyas_ratio_of_the_run_rounded_down(ratio, total, steps):
    # kohya's get_scheduler_fix: num_warmup_steps = int(lr_warmup_steps * max_train_steps) for a float (one process).
    from diffusers.optimization import get_scheduler

    ours = _rates(warmup_schedule(_optimizer(1.0), "cosine", ratio, total), total)
    theirs = _rates(get_scheduler("cosine", _optimizer(1.0), num_warmup_steps=steps, num_training_steps=total), total)
    assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-15)


def test_restarts_and_power_change_the_curve_exactly():
    restarts = _rates(warmup_schedule(_optimizer(1.0), "cosine_with_restarts", 0, 8, num_cycles=2), 9)
    assert restarts[:5] == pytest.approx([1.0, 0.8535533905932737, 0.5, 0.14644660940672627, 1.0])  # back up at 4
    assert restarts[8] == 0.0
    poly = _rates(warmup_schedule(_optimizer(1.0), "polynomial", 0, 4, power=2.0), 6)
    end = 1e-7  # diffusers' lr_end
    assert poly == pytest.approx([1.0, (1 - end) * 0.5625 + end, (1 - end) * 0.25 + end, (1 - end) * 0.0625 + end,
                                  end, end])
    warm = _rates(warmup_schedule(_optimizer(1.0), "constant_with_warmup", 2, 6), 4)
    assert warm == [0.0, 0.5, 1.0, 1.0]


def test_schedule_options_are_checked_before_loading(tmp_path):
    base = dict(model="m", dataset="d", output=str(tmp_path / "o.safetensors"))
    for name in ("constant_with_warmup", "cosine_with_restarts", "polynomial"):
        SDLoraTrainingConfig(**base, lr_schedule=name).check()
    with pytest.raises(ValueError, match="lr_schedule_num_cycles must be an integer in 1"):
        SDLoraTrainingConfig(**base, lr_schedule="cosine_with_restarts", lr_schedule_num_cycles=0).check()
    with pytest.raises(ValueError, match=r"lr_schedule_power must be a number in \(0, inf\)"):
        SDLoraTrainingConfig(**base, lr_schedule="polynomial", lr_schedule_power=-1.0).check()
    with pytest.raises(ValueError, match="decays to 1e-07"):
        SDLoraTrainingConfig(**base, lr_schedule="polynomial", learning_rate=1e-8).check()


# (mixkit's name, its schedule options, transformers' name, transformers' scheduler_specific_kwargs): what kohya's
# get_scheduler_fix builds for --lr_scheduler NAME [--lr_scheduler_num_cycles / _power] [--lr_scheduler_args ...]
KOHYA_SCHEDULES = [
    ("constant_with_warmup", {}, "constant_with_warmup", {}),
    ("linear", {}, "linear", {}),
    ("cosine", {}, "cosine", {}),
    ("cosine", {"schedule_args": {"num_cycles": 1.0}}, "cosine", {"num_cycles": 1.0}),
    ("cosine", {"schedule_args": {"num_cycles": 0.25}}, "cosine", {"num_cycles": 0.25}),
    ("cosine_with_restarts", {"num_cycles": 3}, "cosine_with_restarts", {"num_cycles": 3}),
    ("polynomial", {"power": 2.0}, "polynomial", {"power": 2.0}),
    ("polynomial", {"power": 0.5, "schedule_args": {"lr_end": 1e-4}}, "polynomial", {"power": 0.5, "lr_end": 1e-4}),
]


@pytest.mark.parametrize("name, options, theirs_name, theirs_kwargs", KOHYA_SCHEDULES)
@pytest.mark.parametrize("warmup", [0, 3])
def test_kohyas_schedules_and_lr_scheduler_args_are_transformers_own_rate_for_rate(name, options, theirs_name,
                                                                                   theirs_kwargs, warmup):
    # kohya's get_scheduler_fix calls transformers' TYPE_TO_SCHEDULER_FUNCTION[name](optimizer, num_warmup_steps,
    # num_training_steps, [num_cycles | power], **lr_scheduler_kwargs): the oracle, over every step of the run.
    from transformers.optimization import get_scheduler

    ours = _rates(warmup_schedule(_optimizer(1e-3), name, warmup, 20, **options), 20)
    theirs = _rates(get_scheduler(theirs_name, _optimizer(1e-3), num_warmup_steps=warmup, num_training_steps=20,
                                  scheduler_specific_kwargs=theirs_kwargs), 20)
    assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-18)


def test_a_full_cosine_wave_comes_back_to_the_full_rate_exactly():
    rates = _rates(warmup_schedule(_optimizer(1.0), "cosine", 0, 4, schedule_args={"num_cycles": 1.0}), 5)
    assert rates == pytest.approx([1.0, 0.5, 0.0, 0.5, 1.0], abs=1e-15)  # cos(2 pi p) over p = 0, 1/4 ... 1


def test_kohyas_lr_scheduler_args_list_becomes_lr_schedule_args(tmp_path):
    from mixkit.training.config_file import translate_kohya_options

    assert translate_kohya_options({"lr_scheduler_args": ["num_cycles=1", "lr_end = 1e-5"]}) == \
        {"lr_schedule_args": {"num_cycles": 1, "lr_end": 1e-5}}
    assert translate_kohya_options({"lr_scheduler_args": ""}) == {}  # kohya_ss GUI's empty field
    assert translate_kohya_options({"lr_scheduler_args": []}) == {}
    with pytest.raises(ValueError, match="lr_scheduler_args entry 'num_cycles': kohya's form is key=value"):
        translate_kohya_options({"lr_scheduler_args": ["num_cycles"]})


@pytest.mark.parametrize("schedule, args, message", [
    ("cosine_with_restarts", {"num_cycles": 2}, r"'num_cycles' is not a setting of lr_schedule='cosine_with_restarts' "
                                                r"\(it takes: none\)\. lr_schedule_num_cycles"),
    ("linear", {"lr_end": 1e-5}, r"'lr_end' is not a setting of lr_schedule='linear'"),
    ("cosine", {"min_lr": 1e-6}, r"'min_lr' is not a setting of lr_schedule='cosine' \(it takes: num_cycles: "),
    ("cosine", {"num_cycles": -1}, r"num_cycles=-1 must be a positive number"),
    ("cosine", {"last_epoch": 5}, "position comes from resume_from"),
    ("polynomial", {"lr_end": 1e-3}, r"decays to 0\.001 .*learning_rate must be above it, got 0\.0001"),
])
def test_lr_schedule_args_are_checked_against_the_schedule_before_loading(tmp_path, schedule, args, message):
    config = SDLoraTrainingConfig(model="m", dataset="d", output=str(tmp_path / "o.safetensors"), lr_schedule=schedule,
                                  lr_schedule_args=args)
    with pytest.raises(ValueError, match=message):
        config.check()


def test_processed_tags_are_rejoined_with_comma_space_whatever_the_separator():
    # kohya's process_caption: caption = ", ".join(fixed_tokens + flex_tokens + fixed_suffix_tokens).
    settings = CaptionAugmentation(shuffle=True, keep_tokens=3, separator=";")
    assert augment_caption("a; b;c", settings, random.Random(0)) == "a, b, c"
    with_keep = CaptionAugmentation(separator="|", keep_separator="|||", shuffle=True)
    assert augment_caption("sks | x ||| y | z ||| end", with_keep, random.Random(0)).startswith("sks, ")
