"""Schedule types against k-diffusion's own schedules (the formulas A1111 runs)."""

from __future__ import annotations

import pytest
import torch

from pipelines.samplers import SAMPLERS, SCHEDULE_TYPES, make_scheduler

from .kdiffusion_reference import REFERENCE_SCHEDULES, SD15_SCHEDULER_CONFIG
from .sampling_loop import fresh_scheduler

# Every schedule is A1111's formula evaluated in float64, stored by diffusers as float32.
TOLERANCE = 1e-5

PAIRS = [
    (name, schedule)
    for name in SAMPLERS.names()
    for schedule in SAMPLERS.get(name).schedule_types
    if schedule in REFERENCE_SCHEDULES and name != "LCM"  # LCM's run over its 50 distilled sigmas: test_a1111_lcm.py
]


def distinct_sigmas(scheduler) -> torch.Tensor:
    """The sigma schedule without the repeats second-order schedulers store for their 2nd stage. Restart and DPM fast
    plan their model calls from it (planned_walk.py) and keep it as `schedule`."""
    schedule = getattr(scheduler, "schedule", None)
    return torch.unique_consecutive((scheduler.sigmas if schedule is None else schedule).double())


@pytest.mark.parametrize("sampler, schedule", PAIRS)
@pytest.mark.parametrize("steps", [4, 10, 30])
def test_sigmas_match_k_diffusion(sampler, schedule, steps):
    scheduler = fresh_scheduler(sampler, schedule)
    scheduler.set_timesteps(steps)
    if SAMPLERS.get(sampler).discard_penultimate_sigma:
        # A1111's DPM2 (a): the schedule for steps + 1 without its next-to-last sigma.
        longer = REFERENCE_SCHEDULES[schedule](SD15_SCHEDULER_CONFIG, steps + 1)
        expected = torch.cat([longer[:-2], longer[-1:]])
    else:
        expected = REFERENCE_SCHEDULES[schedule](SD15_SCHEDULER_CONFIG, steps)
    if schedule == "KL Optimal" and "final_sigmas_type" not in scheduler.config:
        # A1111 ends KL Optimal at sigma_min; these classes always end at 0 (catalog.py says so).
        expected = torch.cat([expected[:-1], expected.new_zeros(1)])
    torch.testing.assert_close(distinct_sigmas(scheduler), expected, rtol=TOLERANCE, atol=1e-6)


def test_every_a1111_schedule_type_is_offered_in_its_order():
    assert SCHEDULE_TYPES.names() == [
        "Automatic", "Uniform", "Karras", "Exponential", "Polyexponential", "SGM Uniform", "KL Optimal",
        "Align Your Steps", "Simple", "Normal", "DDIM", "Beta",
    ]
    assert set(SAMPLERS.get("Euler a").schedule_types) == set(SCHEDULE_TYPES.names())


def test_karras_spans_the_full_training_range_even_when_the_model_config_says_leading():
    # SD 1.5 / SDXL configs carry timestep_spacing="leading", which would start Karras below sigma_max.
    scheduler = make_scheduler("Heun", {**SD15_SCHEDULER_CONFIG, "timestep_spacing": "leading"}, "Karras")
    scheduler.set_timesteps(10)
    assert scheduler.sigmas[0].item() == pytest.approx(14.6146, rel=1e-4)
    assert distinct_sigmas(scheduler)[-2].item() == pytest.approx(0.0292, rel=1e-2)


def test_ddim_uses_a1111_timesteps():
    scheduler = make_scheduler("DDIM", SD15_SCHEDULER_CONFIG)
    scheduler.set_timesteps(20)
    # A1111 sd_samplers_timesteps: range(0, 1000, 1000 // steps) + 1, run from high to low, the lowest
    # (t = 1) being where the walk ends rather than a model call.
    assert scheduler.timesteps.tolist() == list(range(51, 1000, 50))[::-1]


def test_automatic_equals_the_sampler_default_schedule():
    auto = make_scheduler("DPM++ 2M", SD15_SCHEDULER_CONFIG, "Automatic")
    karras = make_scheduler("DPM++ 2M", SD15_SCHEDULER_CONFIG, "Karras")
    auto.set_timesteps(12)
    karras.set_timesteps(12)
    assert torch.equal(auto.sigmas, karras.sigmas)


@pytest.mark.parametrize("sampler", ["Euler", "Euler a", "Heun", "LMS", "DPM2", "DPM++ SDE", "DPM++ 2S a", "DPM++ 2M"])
@pytest.mark.parametrize("schedule", ["Uniform", "Karras", "Exponential"])
def test_one_step_starts_at_sigma_max(sampler, schedule):
    # diffusers' own switches collapse a one-step grid to t = 0 (a run started at sigma_min returned the noise).
    scheduler = fresh_scheduler(sampler, schedule)
    scheduler.set_timesteps(1)
    assert scheduler.sigmas[0].item() == pytest.approx(14.6146, rel=1e-4)
    assert scheduler.timesteps[0].item() == pytest.approx(999, abs=0.5)


@pytest.mark.parametrize("sampler", ["DPM2", "DPM2 a"])
def test_dpm2_discards_the_next_to_last_sigma_as_a1111(sampler):
    # A1111 options {"discard_next_to_last_sigma": True}: Karras for 5 steps, 0.0292 (sigma_min) dropped.
    scheduler = fresh_scheduler(sampler)
    scheduler.set_timesteps(4)
    assert distinct_sigmas(scheduler).tolist() == pytest.approx([14.6146, 4.7965, 1.2741, 0.24795, 0.0], rel=1e-4)
    assert [name for name in SAMPLERS.names() if SAMPLERS.get(name).discard_penultimate_sigma] == [
        "DPM++ 3M SDE", "DPM2", "DPM2 a"]
