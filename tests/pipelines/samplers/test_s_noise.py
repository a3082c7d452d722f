"""A1111's "Sigma noise" (s_noise) for the samplers whose k-diffusion function takes it besides Euler/Heun/DPM2:
DPM2 a and DPM++ 2S a (`x + noise * s_noise * sigma_up`), DPM++ SDE (`noise_sampler(...) * s_noise * su`) and
DPM++ 2M SDE (`noise_sampler(...) * sigma_next * sqrt(1 - exp(-2 eta h)) * s_noise`): the fresh noise, scaled."""

from __future__ import annotations

import pytest
import torch

from pipelines.samplers import make_scheduler, start_at_first_step

from .kdiffusion_reference import SD15_SCHEDULER_CONFIG


def _scheduler(sampler: str, s_noise: float, steps: int = 6, eta: float = 1.0):
    scheduler = make_scheduler(sampler, SD15_SCHEDULER_CONFIG, "Karras")
    scheduler.s_noise, scheduler.eta = s_noise, eta
    scheduler.set_timesteps(steps)
    start_at_first_step(scheduler)
    return scheduler


@pytest.mark.parametrize("sampler", ["DPM2 a", "DPM++ 2S a"])
@pytest.mark.parametrize("eta", [1.0, 0.6])
def test_ancestral_noise_std_is_scaled(sampler, eta):
    plain, scaled = _scheduler(sampler, 1.0, eta=eta), _scheduler(sampler, 0.8, eta=eta)
    # (diffusers leaves NaN in the entries past the last step, which no step reads)
    torch.testing.assert_close(scaled.sigmas_up, plain.sigmas_up * 0.8, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(scaled.sigmas_down, plain.sigmas_down) and torch.equal(scaled.timesteps, plain.timesteps)


class FixedNoise:
    """A noise sampler that always returns the same increment (standing in for the Brownian tree)."""

    def __init__(self, noise: torch.Tensor, scale: float = 1.0) -> None:
        self.noise, self.scale = noise, scale

    def __call__(self, sigma, sigma_next):
        return self.noise * self.scale


@pytest.mark.parametrize("sampler", ["DPM++ SDE", "DPM++ 2M SDE", "DPM++ 2M SDE Heun"])
@pytest.mark.parametrize("eta", [1.0, 0.5])
def test_sde_noise_is_scaled(sampler, eta):
    generator = torch.Generator().manual_seed(2)
    sample, output, noise = (torch.randn(1, 4, 4, 4, generator=generator) for _ in range(3))
    results = []
    for s_noise, scale in ((0.7, 1.0), (1.0, 0.7)):  # s_noise 0.7 == the same step with 0.7 times the noise
        scheduler = _scheduler(sampler, s_noise, eta=eta)
        scheduler.noise_sampler = FixedNoise(noise, scale)
        x = sample * float(scheduler.init_noise_sigma)
        for t in scheduler.timesteps[:3]:
            x = scheduler.step(output, t, x).prev_sample
        results.append(x)
    torch.testing.assert_close(results[0], results[1], rtol=1e-6, atol=1e-6)
    unscaled = _scheduler(sampler, 1.0, eta=eta)
    unscaled.noise_sampler = FixedNoise(noise)
    x = sample * float(unscaled.init_noise_sigma)
    for t in unscaled.timesteps[:3]:
        x = unscaled.step(output, t, x).prev_sample
    assert (x - results[0]).abs().max() > 1e-3
