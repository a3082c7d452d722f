"""A1111's UniPC grid (sd_samplers_timesteps_impl.unipc + uni_pc's NoiseScheduleVP('discrete')): its step count,
fractional model times and noise levels, and the update still sampling the right distribution on them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipelines.samplers import make_scheduler
from pipelines.samplers.a1111_timesteps import timestep_grid

from .kdiffusion_reference import SD15_SCHEDULER_CONFIG, GaussianDataModel, alphas_cumprod
from .sampling_loop import run_sampler


def a1111_model_times(n: int, t_start: float | None = None) -> np.ndarray:
    """A1111 restated: UniPC.sample(steps=n, t_start) with skip_type time_uniform over linspace(t_T, 1/1000, n + 1),
    the model called at get_model_input_time(t) = (t - 1/1000) * 1000; txt2img's n is len(timesteps), the grid's
    length, img2img's t_enc."""
    t_T = 1.0 if t_start is None else t_start
    return (np.linspace(t_T, 1 / 1000, n + 1) - 1 / 1000) * 1000


@pytest.mark.parametrize("steps, calls", [(7, 8), (15, 16), (20, 20), (30, 31), (50, 50), (1, 1)])
def test_txt2img_runs_a1111s_step_count_at_its_fractional_model_times(steps, calls):
    scheduler = make_scheduler("UniPC", SD15_SCHEDULER_CONFIG)
    scheduler.set_timesteps(steps)
    assert len(scheduler.timesteps) == calls
    np.testing.assert_allclose(scheduler.timesteps.numpy(), a1111_model_times(len(timestep_grid(steps)))[:-1],
                               rtol=0, atol=1e-3)


def test_noise_levels_interpolate_log_alpha_between_whole_timesteps():
    # NoiseScheduleVP('discrete'): log alpha_t = interp(t, (j + 1) / 1000, 0.5 log alphas_cumprod[j]).
    scheduler = make_scheduler("UniPC", SD15_SCHEDULER_CONFIG)
    scheduler.set_timesteps(30)
    ac = alphas_cumprod(SD15_SCHEDULER_CONFIG).double()
    for index, time in enumerate(a1111_model_times(31)):
        low = min(int(np.floor(time)), 998)
        w = time - low
        log_alpha = (1 - w) * 0.5 * torch.log(ac[low]) + w * 0.5 * torch.log(ac[low + 1])
        alpha2 = torch.exp(2 * log_alpha)
        expected = torch.sqrt((1 - alpha2) / alpha2)
        assert float(scheduler.sigmas[index]) == pytest.approx(float(expected), rel=1e-4)  # diffusers: float32 betas
    assert float(scheduler.sigmas[-1]) == pytest.approx(float(((1 - ac[0]) / ac[0]).sqrt()), rel=1e-4)  # ends at t 0


@pytest.mark.parametrize("steps, t_enc, noise_at, first, count", [(10, 5, 501, 401, 5), (20, 14, 701, 651, 14)])
def test_img2img_noises_at_grid_t_enc_and_walks_from_the_point_below(steps, t_enc, noise_at, first, count):
    scheduler = make_scheduler("UniPC", SD15_SCHEDULER_CONFIG)
    scheduler.set_timesteps(steps)
    scheduler.set_img2img_start(t_enc)
    assert scheduler.noise_timestep == noise_at
    expected = a1111_model_times(t_enc, t_start=first / 1000 + 1 / 1000)
    np.testing.assert_allclose(scheduler.timesteps.numpy(), expected[:-1], rtol=0, atol=1e-3)
    assert len(scheduler.timesteps) == count


def test_img2img_noising_is_a1111s_at_that_whole_timestep():
    scheduler = make_scheduler("UniPC", SD15_SCHEDULER_CONFIG)
    scheduler.set_timesteps(10)
    scheduler.set_img2img_start(5)
    x0, noise = torch.ones(1, 4, 2, 2), torch.full((1, 4, 2, 2), 2.0)
    ac = alphas_cumprod(SD15_SCHEDULER_CONFIG).double()[501]
    got = scheduler.add_noise(x0, noise, torch.tensor([scheduler.noise_timestep]))
    torch.testing.assert_close(got, (ac.sqrt() + 2 * (1 - ac).sqrt()).float().expand(1, 4, 2, 2))


@pytest.mark.parametrize("steps", [30, 100])
def test_samples_the_data_distribution_on_the_fractional_grid(steps):
    # The exact denoiser for N(0.5, 0.5^2) data: the sampler must land on that mean and spread (measured: mean 0.479,
    # std 0.481 at 30 steps, 0.494 at 100; ending at sigma_min, not 0, leaves a little noise at any count).
    latents = torch.randn(4, 4, 16, 16, generator=torch.Generator().manual_seed(0))
    scheduler = make_scheduler("UniPC", SD15_SCHEDULER_CONFIG)
    x = run_sampler(scheduler, GaussianDataModel(SD15_SCHEDULER_CONFIG), latents, steps)
    assert float(x.mean()) == pytest.approx(0.5, abs=0.03)
    assert float(x.std()) == pytest.approx(0.5, abs=0.03)
