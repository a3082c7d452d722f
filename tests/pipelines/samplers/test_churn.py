"""Euler / Heun / DPM2 churn (pipelines/samplers/churn.py) against k-diffusion's `sample_euler`, `sample_heun` and
`sample_dpm_2`, written here from their formulas, on a model whose denoiser is exact at any sigma."""

from __future__ import annotations

import math

import pytest
import torch

from pipelines.sampler_parameters import SamplerParameters
from pipelines.samplers import initial_noise_scale, make_scheduler, start_at_first_step
from pipelines.samplers.churn import churn_gamma, churn_rows

from .kdiffusion_reference import (
    REFERENCE_SCHEDULES,
    SD15_SCHEDULER_CONFIG,
    gaussian_denoiser,
    sigma_to_t,
    t_to_sigma,
)

CONFIG = SD15_SCHEDULER_CONFIG


class ExactEpsilonModel:
    """An epsilon-prediction UNet stand-in that reads sigma from its timestep as k-diffusion does (log-linear
    `t_to_sigma`), so a model called at t(sigma_hat) denoises at exactly sigma_hat."""

    def __init__(self) -> None:
        self.timesteps: list[float] = []

    def __call__(self, scaled: torch.Tensor, t) -> torch.Tensor:
        t = float(t)
        self.timesteps.append(t)
        sigma = t_to_sigma(CONFIG, torch.tensor(t, dtype=torch.float64)).item()
        x = scaled.double() * (sigma**2 + 1) ** 0.5
        return ((x - gaussian_denoiser(x, sigma)) / sigma).to(scaled.dtype)


def denoiser(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """k-diffusion's `CompVisDenoiser` around the model: input scaled by 1 / sqrt(sigma^2 + 1), timestep
    `sigma_to_t(sigma)` (clamped to 999 above the model's sigma_max, where churn can take sigma_hat)."""
    eps = ExactEpsilonModel()(x / (sigma**2 + 1) ** 0.5, sigma_to_t(CONFIG, sigma))
    return x - sigma * eps


def _noise(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return torch.randn(x.shape, generator=generator, dtype=torch.float32).double()


def _churned(x, sigma, steps, p: SamplerParameters, generator):
    """k-diffusion's churn step: (x at sigma_hat, sigma_hat); noise drawn only where gamma > 0."""
    gamma = min(p.s_churn / steps, 2**0.5 - 1) if p.s_tmin <= sigma <= (p.s_tmax or math.inf) else 0.0
    sigma_hat = sigma * (gamma + 1)
    if gamma > 0:
        x = x + _noise(x, generator) * p.s_noise * (sigma_hat**2 - sigma**2) ** 0.5
    return x, sigma_hat


def reference(sampler: str, x: torch.Tensor, sigmas: torch.Tensor, p: SamplerParameters, generator) -> torch.Tensor:
    """k-diffusion's sample_euler / sample_heun / sample_dpm_2 with churn, on the exact Gaussian denoiser."""
    steps = len(sigmas) - 1
    for i in range(steps):
        sigma, sigma_next = sigmas[i].item(), sigmas[i + 1].item()
        x, sigma_hat = _churned(x, sigma, steps, p, generator)
        d = (x - denoiser(x, sigma_hat)) / sigma_hat
        if sampler == "Euler" or sigma_next == 0:
            x = x + d * (sigma_next - sigma_hat)
        elif sampler == "Heun":
            x_2 = x + d * (sigma_next - sigma_hat)
            d_2 = (x_2 - denoiser(x_2, sigma_next)) / sigma_next
            x = x + (d + d_2) / 2 * (sigma_next - sigma_hat)
        else:  # DPM2: midpoint in log sigma between sigma_hat and sigma_next
            sigma_mid = math.exp((math.log(sigma_hat) + math.log(sigma_next)) / 2)
            x_2 = x + d * (sigma_mid - sigma_hat)
            d_2 = (x_2 - denoiser(x_2, sigma_mid)) / sigma_mid
            x = x + d_2 * (sigma_next - sigma_hat)
    return x


def run_with_churn(scheduler, model, latents: torch.Tensor, steps: int, generator) -> torch.Tensor:
    """The order `pipelines.sampling.run_sampler` calls things in: churn, scale, model at model_t, step."""
    scheduler.set_timesteps(steps)
    start_at_first_step(scheduler)
    x = latents * initial_noise_scale(scheduler)
    for t in scheduler.timesteps:
        [x], model_t = churn_rows([scheduler], [x], t, [generator])
        x = scheduler.step(model(scheduler.scale_model_input(x, t), model_t), t, x).prev_sample
    return x


def _schedule(sampler: str, schedule: str, steps: int) -> torch.Tensor:
    if sampler == "DPM2":  # discards its penultimate sigma, as A1111
        sigmas = REFERENCE_SCHEDULES[schedule](CONFIG, steps + 1)
        return torch.cat([sigmas[:-2], sigmas[-1:]])
    return REFERENCE_SCHEDULES[schedule](CONFIG, steps)


CASES = [
    SamplerParameters(s_churn=1.0),
    SamplerParameters(s_churn=40.0, s_noise=1.003),  # gamma capped at sqrt(2) - 1
    SamplerParameters(s_churn=2.0, s_tmin=0.5, s_tmax=5.0),  # only the middle of the walk churns
]


@pytest.mark.parametrize("sampler", ["Euler", "Heun", "DPM2"])
@pytest.mark.parametrize("schedule", ["Karras", "Uniform"])
@pytest.mark.parametrize("parameters", CASES, ids=["churn1", "capped", "window"])
def test_churn_matches_k_diffusion_with_the_same_noise(sampler, schedule, parameters):
    steps = 8
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    sigmas = _schedule(sampler, schedule, steps)
    expected = reference(sampler, latents * sigmas[0], sigmas, parameters, torch.Generator().manual_seed(11))
    scheduler = make_scheduler(sampler, CONFIG, schedule, parameters=parameters)
    scheduler.churn_parameters = parameters
    got = run_with_churn(scheduler, ExactEpsilonModel(), latents.float(), steps, torch.Generator().manual_seed(11))
    # float32 latents over 8 steps (the reference is float64). DPM2 on Karras: diffusers rounds the model timesteps of
    # its steps to integers where nothing churns (measured 7e-4 with no churn at all; churned steps take k-diffusion's
    # fractional t(sigma_hat)). Without churn the result differs by > 0.01.
    tolerance = 1e-3 if sampler == "DPM2" and schedule == "Karras" else 2e-4
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=tolerance)
    plain = reference(sampler, latents * sigmas[0], sigmas, SamplerParameters(), None)
    assert (plain - expected).abs().max() > 1e-2


def test_the_model_is_called_at_sigma_hat():
    parameters = SamplerParameters(s_churn=1.0)
    scheduler = make_scheduler("Euler", CONFIG, "Karras", parameters=parameters)
    scheduler.churn_parameters = parameters
    scheduler.set_timesteps(5)
    start_at_first_step(scheduler)
    sigma = scheduler.sigmas[0].item()
    sample = torch.zeros(1, 4, 2, 2)
    [churned], model_t = churn_rows([scheduler], [sample], scheduler.timesteps[0], [torch.Generator().manual_seed(0)])
    sigma_hat = sigma * (1 + churn_gamma(sigma, 5, 1.0, 0.0, math.inf))
    assert churn_gamma(sigma, 5, 1.0, 0.0, math.inf) == pytest.approx(0.2)
    assert scheduler.sigmas[0].item() == pytest.approx(sigma_hat, rel=1e-7)
    assert float(model_t) == pytest.approx(sigma_to_t(CONFIG, sigma_hat), abs=1e-3)  # 999 clamps: above sigma_max
    noise = torch.randn(sample.shape, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(churned, noise * (sigma_hat**2 - sigma**2) ** 0.5)


def test_model_timestep_inside_the_range_is_k_diffusions_sigma_to_t():
    parameters = SamplerParameters(s_churn=1.0, s_tmax=10.0)  # the first sigma (14.6) does not churn
    scheduler = make_scheduler("Euler", CONFIG, "Karras", parameters=parameters)
    scheduler.churn_parameters = parameters
    scheduler.set_timesteps(5)
    start_at_first_step(scheduler)
    generator = torch.Generator().manual_seed(0)
    [x], model_t = churn_rows([scheduler], [torch.zeros(1, 4, 2, 2)], scheduler.timesteps[0], [generator])
    assert float(model_t) == float(scheduler.timesteps[0]) and not x.any()  # gamma 0: nothing drawn, nothing moved
    scheduler.step(torch.zeros_like(x), scheduler.timesteps[0], x)
    sigma = scheduler.sigmas[1].item()
    _, model_t = churn_rows([scheduler], [x], scheduler.timesteps[1], [generator])
    assert float(model_t) == pytest.approx(sigma_to_t(CONFIG, sigma * 1.2), abs=2e-4)


@pytest.mark.parametrize("sampler", ["Euler", "Heun", "DPM2", "DPM++ 2M"])
def test_default_parameters_build_the_very_same_scheduler(sampler):
    plain = make_scheduler(sampler, CONFIG, "Karras")
    assert type(make_scheduler(sampler, CONFIG, "Karras", parameters=SamplerParameters())) is type(plain)
    # churn is ignored by samplers without it, as A1111 passes it to sample_euler / heun / dpm_2 only
    assert type(make_scheduler(sampler, CONFIG, "Karras", parameters=SamplerParameters(s_churn=1.0))) is type(plain) \
        or sampler != "DPM++ 2M"
    assert not hasattr(plain, "churn")


def test_img2img_churn_counts_the_steps_it_walks():
    # A1111 hands k-diffusion sigmas[steps - t_enc - 1:], so gamma divides by the steps actually run
    parameters = SamplerParameters(s_churn=1.0)
    scheduler = make_scheduler("Euler", CONFIG, "Karras", parameters=parameters)
    scheduler.churn_parameters = parameters
    scheduler.set_timesteps(10)
    scheduler.set_begin_index(6)
    sigma = scheduler.sigmas[6].item()
    churn_rows([scheduler], [torch.zeros(1, 4, 2, 2)], scheduler.timesteps[6], [torch.Generator().manual_seed(0)])
    assert scheduler.sigmas[6].item() == pytest.approx(sigma * (1 + 1.0 / 4), rel=1e-7)
