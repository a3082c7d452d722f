"""`pipelines.diffusers_loop`: the input checks and progress/Interrupt bookkeeping text to audio and video share."""

import pytest
import torch

from pipelines.control import GenerationControl
from pipelines.diffusers_loop import (LoopProgress, check_cfg_scale, check_generator, check_int, guided_prediction,
                                      seeded_generator)


def test_progress_counts_user_steps_over_more_model_calls():
    reports = []
    progress = LoopProgress(3, 6, lambda p: reports.append((p.step, p.total_steps)), GenerationControl())
    stops = [progress.stop_after(index, torch.zeros(1)) for index in range(6)]
    assert reports == [(1, 3), (2, 3), (3, 3)]
    assert stops == [False] * 6


def test_interrupt_stops_at_a_completed_step_but_not_after_the_last_call():
    control = GenerationControl()
    progress = LoopProgress(2, 4, None, control)
    control.interrupt()
    assert progress.stop_after(0, None) is False  # step 1 not complete yet
    assert progress.stop_after(1, None) is True
    last = LoopProgress(1, 1, None, control)
    assert last.stop_after(0, None) is False  # the run is done: nothing to cut short


def test_checks_name_the_value():
    with pytest.raises(ValueError, match=r"steps must be an integer in \[1, 5\], got True"):
        check_int("steps", True, 1, 5)
    with pytest.raises(ValueError, match="cfg_scale must be a number in"):
        check_cfg_scale(10 ** 400, 100.0)  # a huge int: no OverflowError from a float conversion
    with pytest.raises(ValueError, match="cfg_scale"):
        check_cfg_scale(float("nan"), 100.0)
    with pytest.raises(ValueError, match="not both"):
        check_generator(torch.Generator(), 3)
    with pytest.raises(TypeError, match="torch.Generator"):
        check_generator(3, -1)


def test_seeded_generator_and_guidance():
    seed, generator = seeded_generator(7, None)
    expected = torch.rand(2, generator=torch.Generator().manual_seed(7))
    assert seed == 7 and torch.equal(torch.rand(2, generator=generator), expected)
    own = torch.Generator()
    assert seeded_generator(-1, own) == (-1, own)
    pred = torch.tensor([[1.0], [3.0]])
    assert guided_prediction(pred, 2.0, True, 1, "audio").tolist() == [[5.0]]  # 1 + 2 * (3 - 1)
    with pytest.raises(ValueError, match="NaN/inf at step 4.*no video was made"):
        guided_prediction(torch.tensor([float("inf")]), 1.0, False, 4, "video")
