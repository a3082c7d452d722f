"""Learning-rate schedules by name: exact factors at known steps, and unknown names listed."""

from __future__ import annotations

import math

import pytest

from mixkit.errors import UnknownNameError
from mixkit.training.blip2_stage2_config import Blip2Stage2Config
from mixkit.training.optimizers import warmup_then


def test_warm_up_is_linear_then_the_named_schedule_runs_over_the_remaining_steps():
    assert [warmup_then("constant", s, 4, 10) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert warmup_then("cosine", 3, 4, 10) == 1.0
    assert warmup_then("cosine", 4, 4, 10) == 1.0                         # first step after warm-up: the peak
    assert warmup_then("cosine", 7, 4, 10) == pytest.approx(0.5)          # half-way through the decay
    assert warmup_then("cosine", 10, 4, 10) == pytest.approx(0.0, abs=1e-12)
    assert warmup_then("cosine", 12, 4, 10) == pytest.approx(0.0, abs=1e-12)  # past the end it stays at the floor
    assert warmup_then("cosine", 2, 0, 8) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))


def test_an_unknown_schedule_is_refused_with_the_known_names(tmp_path):
    config = Blip2Stage2Config(model="m", dataset="d.jsonl", output=str(tmp_path / "o"), lr_schedule="linear")
    with pytest.raises(UnknownNameError, match="constant.*cosine|cosine.*constant"):
        config.check()
