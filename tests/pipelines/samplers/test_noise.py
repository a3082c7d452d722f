"""extra_step_kwargs / seed_brownian_noise: per-image noise plumbing for the pipeline loop."""

from __future__ import annotations

import inspect

import pytest
import torch

from pipelines.samplers import SAMPLERS, extra_step_kwargs, make_scheduler, seed_brownian_noise

from .kdiffusion_reference import SD15_SCHEDULER_CONFIG
from .sampling_loop import fresh_scheduler


@pytest.mark.parametrize("sampler", SAMPLERS.names())
def test_generator_is_passed_exactly_when_step_accepts_it(sampler):
    scheduler = fresh_scheduler(sampler)
    generator = torch.Generator().manual_seed(0)
    accepts = "generator" in inspect.signature(scheduler.step).parameters
    assert extra_step_kwargs(scheduler, generator) == ({"generator": generator} if accepts else {})
    assert extra_step_kwargs(scheduler, None) == {}
    # Every generator-driven sampler must actually be able to receive a generator.
    if SAMPLERS.get(sampler).noise_source == "generator":
        assert accepts


def test_seed_brownian_noise_sets_one_seed_per_image():
    scheduler = fresh_scheduler("DPM++ SDE")
    seed_brownian_noise(scheduler, [5, 6])
    assert scheduler.noise_sampler_seed == [5, 6]


def test_seed_brownian_noise_ignores_other_schedulers():
    scheduler = make_scheduler("Euler a", SD15_SCHEDULER_CONFIG)
    seed_brownian_noise(scheduler, [5])
    assert not hasattr(scheduler, "noise_sampler_seed")


@pytest.mark.parametrize("seeds", [[], [1.5], [True], "12"])
def test_seed_brownian_noise_rejects_bad_seeds(seeds):
    scheduler = fresh_scheduler("DPM++ SDE")
    with pytest.raises(ValueError, match="seeds"):
        seed_brownian_noise(scheduler, seeds)
