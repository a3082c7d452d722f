"""A1111's "DPM fast" against k-diffusion's `sample_dpm_fast` (kdiffusion_oracle.py), called as A1111 calls it."""

from __future__ import annotations

import pytest
import torch
from pipelines.samplers import list_samplers, resolve_sampler
from pipelines.samplers.dpm_fast import dpm_fast_steps

from .kdiffusion_oracle import get_sigmas_karras, k_denoiser, model_sigma_range, sample_dpm_fast
from .kdiffusion_reference import GaussianDataModel, SD15_SCHEDULER_CONFIG
from .sampling_loop import fresh_scheduler, img2img_inputs, run_img2img, run_sampler


def generator_noise(shape, seed: int):
    """k-diffusion's default noise sampler (`randn_like`), drawn from the image's generator as A1111's RNG does."""
    generator = torch.Generator().manual_seed(seed)
    return lambda sigma, sigma_next: torch.randn(shape, generator=generator)


@pytest.mark.parametrize("n, orders", [(1, [1]), (2, [2]), (3, [2, 1]), (7, [3, 3, 1]), (9, [3, 3, 2, 1]),
                                       (20, [3] * 6 + [2])])
def test_n_model_calls_in_steps_of_order_3(n, orders):
    steps = dpm_fast_steps(0.03, 14.6, n, eta=1.0)
    assert [step.order for step in steps] == orders
    assert float(steps[-1].t_next) == pytest.approx(-torch.tensor(0.03).log().item())  # ends at sigma_min
    assert steps[-1].sigma_up == 0  # ... with no noise left to add


@pytest.mark.parametrize("eta, s_noise", [(1.0, 1.0), (0.0, 1.0), (0.6, 0.8)])
@pytest.mark.parametrize("steps", [4, 10, 21])
def test_txt2img_matches_k_diffusion_as_a1111_calls_it(steps, eta, s_noise):
    """A1111's `sample`: x * sigmas[0] of the schedule type, then sample_dpm_fast(sigma_min, sigma_max of the model,
    n=steps, eta, s_noise), its noise from the image's RNG."""
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3))
    sigma_min, sigma_max = model_sigma_range()
    x = latents * sigma_max  # Uniform's (Automatic's) first sigma
    expected = sample_dpm_fast(k_denoiser(), x, sigma_min, sigma_max, steps, generator_noise(x.shape, 9), eta=eta,
                               s_noise=s_noise)
    scheduler = fresh_scheduler("DPM fast")
    scheduler.eta, scheduler.s_noise = eta, s_noise
    got = run_sampler(scheduler, GaussianDataModel(SD15_SCHEDULER_CONFIG), latents, steps,
                      generator=torch.Generator().manual_seed(9))
    assert len(scheduler.timesteps) == steps  # one model call per step
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-4)  # measured: 1.3e-5


def test_img2img_runs_over_the_schedule_tails_sigma_range():
    """A1111's `sample_img2img`: sigma_max = sigma_sched[0], sigma_min = sigma_sched[-2], n = len(sigma_sched) - 1."""
    steps, t_enc = 12, 7
    tail = get_sigmas_karras(steps, *model_sigma_range())[steps - t_enc - 1:]
    init, noise = img2img_inputs()
    expected = sample_dpm_fast(k_denoiser(), init + noise * tail[0], tail[-2].item(), tail[0].item(), len(tail) - 1,
                               generator_noise(init.shape, 9), eta=1.0)
    scheduler = fresh_scheduler("DPM fast", "Karras")
    got = run_img2img(scheduler, GaussianDataModel(SD15_SCHEDULER_CONFIG), init, noise, steps, t_enc,
                      torch.Generator().manual_seed(9))
    assert len(scheduler.timesteps) == t_enc + 1
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-4)


def test_registered_as_a1111_lists_it():
    assert resolve_sampler("k_dpm_fast") == resolve_sampler("DPM fast", "Uniform")
    item = {item["name"]: item for item in list_samplers()}["DPM fast"]
    assert item["aliases"] == ["k_dpm_fast"]
    # A1111 1.10: ('DPM fast', 'sample_dpm_fast', ['k_dpm_fast'], {"uses_ensd": True})
    assert item["options"]["uses_ensd"] is True and "scheduler" not in item["options"]
