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


SHAPE = (1, 4, 8, 8)


def test_sampler_noise_from_a_torch_generator_is_randn_tensors_draw():
    from diffusers.utils.torch_utils import randn_tensor

    from pipelines.samplers.noise import sampler_noise

    drawn = sampler_noise(SHAPE, torch.Generator().manual_seed(4), torch.device("cpu"), torch.float32)
    assert torch.equal(drawn, randn_tensor(SHAPE, generator=torch.Generator().manual_seed(4)))


def test_sampler_noise_from_philox_generators_is_each_ones_next_draw():
    from mixkit.random import PhiloxGenerator
    from pipelines.samplers.noise import sampler_noise

    single = PhiloxGenerator(4, offset=2)
    assert torch.equal(sampler_noise(SHAPE, single, torch.device("cpu"), torch.float32),
                       PhiloxGenerator(4, offset=2).randn(SHAPE))
    assert single.offset == 3
    rows = [PhiloxGenerator(4, offset=1), PhiloxGenerator(9, offset=1)]  # DPM adaptive's whole-batch walk
    drawn = sampler_noise((2, 4, 8, 8), rows, torch.device("cpu"), torch.float16)
    assert drawn.dtype == torch.float16
    assert torch.equal(drawn[1:], PhiloxGenerator(9, offset=1).randn(SHAPE).half())


def test_dpm2_ancestral_adds_the_philox_draw_where_diffusers_adds_its_own():
    """DPM2 a steps in diffusers' code, which draws with torch only: with an NV generator its second-order call
    must differ from the torch one by exactly (NV noise - torch noise) * sigma_up, and its first call not at all."""
    from mixkit.random import PhiloxGenerator

    sample = torch.randn(SHAPE, generator=torch.Generator().manual_seed(1)) * 14
    model_output = torch.randn(SHAPE, generator=torch.Generator().manual_seed(2))
    outputs, sigma_up = [], None
    for generator in (torch.Generator().manual_seed(3), PhiloxGenerator(3)):
        scheduler = fresh_scheduler("DPM2 a")
        scheduler.set_timesteps(4, device="cpu")
        first = scheduler.step(model_output, scheduler.timesteps[0], sample, generator=generator).prev_sample
        second = scheduler.step(model_output, scheduler.timesteps[1], first, generator=generator).prev_sample
        outputs.append((first, second))
        sigma_up = scheduler.sigmas_up[0]
    (torch_first, torch_second), (nv_first, nv_second) = outputs
    assert torch.equal(torch_first, nv_first)
    torch_noise = torch.randn(SHAPE, generator=torch.Generator().manual_seed(3))
    nv_noise = PhiloxGenerator(3).randn(SHAPE)
    assert sigma_up > 0
    assert torch.allclose(nv_second - torch_second, (nv_noise - torch_noise) * sigma_up, atol=1e-5)
