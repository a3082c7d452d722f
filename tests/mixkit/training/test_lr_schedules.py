"""Learning-rate schedules by name: exact factors at known steps, and unknown names listed."""

from __future__ import annotations

import math

import pytest

from mixkit.errors import UnknownNameError
from mixkit.training.blip2_stage2_config import Blip2Stage2Config
from mixkit.training.lr_schedules import warmup_schedule, warmup_then
from mixkit.training.sd_lora_config import SDLoraTrainingConfig


def test_warm_up_is_linear_then_the_named_schedule_runs_over_the_remaining_steps():
    # diffusers' (kohya's) warm-up: step s at s / warmup, so the first step runs at 0 and step `warmup` at the peak.
    assert [warmup_then("constant", s, 4, 10) for s in range(6)] == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    assert warmup_then("cosine", 3, 4, 10) == 0.75
    assert warmup_then("cosine", 4, 4, 10) == 1.0                         # first step after warm-up: the peak
    assert warmup_then("cosine", 7, 4, 10) == pytest.approx(0.5)          # half-way through the decay
    assert warmup_then("cosine", 10, 4, 10) == pytest.approx(0.0, abs=1e-12)
    assert warmup_then("cosine", 12, 4, 10) == pytest.approx(0.0, abs=1e-12)  # past the end it stays at the floor
    assert warmup_then("cosine", 2, 0, 8) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert [warmup_then("linear", s, 2, 6) for s in range(7)] == [0.0, 0.5, 1.0, 0.75, 0.5, 0.25, 0.0]


def test_the_scheduler_sets_every_parameter_group_to_its_own_rate_times_the_factor():
    import torch

    unet, text = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([{"params": [unet], "lr": 0.4}, {"params": [text], "lr": 0.2}], lr=0.4)
    schedule = warmup_schedule(optimizer, "linear", warmup_steps=1, total_steps=5)
    seen = []
    for _ in range(5):
        seen.append([group["lr"] for group in optimizer.param_groups])
        optimizer.step()
        schedule.step()
    assert seen == [[0.4 * factor, 0.2 * factor] for factor in (0.0, 1.0, 0.75, 0.5, 0.25)]


def test_an_unknown_schedule_is_refused_with_the_known_names(tmp_path):
    config = Blip2Stage2Config(model="m", dataset="d.jsonl", output=str(tmp_path / "o"), lr_schedule="cosine_restarts")
    with pytest.raises(UnknownNameError, match="constant.*cosine.*linear"):
        config.check()
    lora = SDLoraTrainingConfig(model="m", dataset="d", output=str(tmp_path / "o.safetensors"), lr_schedule="step")
    with pytest.raises(UnknownNameError, match="constant.*cosine.*linear"):
        lora.check()
    with pytest.raises(UnknownNameError, match="constant.*cosine.*linear"):
        warmup_schedule(None, "inverse_sqrt", 0, 10)
