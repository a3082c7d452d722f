"""A1111's schedule types diffusers lacks (sigma_schedules.py) and "Euler a" on any schedule."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from diffusers import EulerAncestralDiscreteScheduler, EulerDiscreteScheduler

from pipelines.samplers import make_scheduler
from pipelines.samplers.sigma_schedules import ddim_sigmas, karras_sigmas

from .kdiffusion_reference import (
    AYS_SD15,
    AYS_SDXL,
    REFERENCE_SCHEDULES,
    SD15_SCHEDULER_CONFIG,
    GaussianDataModel,
    align_your_steps_sigmas,
    sample_dpmpp_2m,
    sample_dpmpp_2m_sde,
    sample_euler_ancestral,
    sample_lms,
)
from .sampling_loop import fresh_scheduler, run_sampler


def _latents() -> torch.Tensor:
    return torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)


@pytest.mark.parametrize("sdxl, published", [(False, AYS_SD15), (True, AYS_SDXL)])
def test_align_your_steps_at_eleven_steps_is_nvidias_list_for_the_model_family(sdxl, published):
    # NVIDIA publishes 11 sigmas; A1111 walks them as they are, then to 0, when steps == 11.
    scheduler = make_scheduler("Euler", SD15_SCHEDULER_CONFIG, "Align Your Steps", sdxl=sdxl)
    scheduler.set_timesteps(11)
    assert scheduler.sigmas.tolist() == pytest.approx([*published, 0.0], rel=1e-6)
    resampled = make_scheduler("Euler", SD15_SCHEDULER_CONFIG, "Align Your Steps", sdxl=sdxl)
    resampled.set_timesteps(25)
    expected = align_your_steps_sigmas(SD15_SCHEDULER_CONFIG, 25, sdxl=sdxl)
    torch.testing.assert_close(resampled.sigmas.double(), expected, rtol=1e-5, atol=1e-7)


def test_ddim_schedule_walks_a_step_more_when_1000_is_not_a_multiple_of_steps():
    sigmas = np.sqrt(np.full(1000, 2.0))  # only the count matters here
    assert len(ddim_sigmas(30, sigmas)) - 1 == 31  # stride 33: t = 1, 34, ..., 991
    assert len(ddim_sigmas(25, sigmas)) - 1 == 25
    scheduler = fresh_scheduler("Euler", "DDIM")
    scheduler.set_timesteps(30)
    assert len(scheduler.timesteps) == 31


def test_kl_optimal_ends_at_sigma_min_where_the_class_can():
    scheduler = fresh_scheduler("DPM++ 2M", "KL Optimal")
    scheduler.set_timesteps(8)
    assert scheduler.sigmas[-1].item() == pytest.approx(0.029168, rel=1e-4)
    assert fresh_scheduler("Euler a", "KL Optimal").config.final_sigmas_type == "sigma_min"


def test_euler_a_on_uniform_is_diffusers_ancestral_euler_draw_for_draw():
    # diffusers interpolates sigma linearly between timesteps where k-diffusion (and mixkit) interpolate
    # log sigma: the schedules differ by up to 1e-4 relative, the samples by less than 1e-3.
    latents = _latents().float()
    model = GaussianDataModel(SD15_SCHEDULER_CONFIG)
    ours = run_sampler(fresh_scheduler("Euler a", "Uniform"), model, latents, 9, generator=torch.Generator().manual_seed(5))
    theirs_scheduler = EulerAncestralDiscreteScheduler.from_config({**SD15_SCHEDULER_CONFIG, "timestep_spacing": "linspace"})
    theirs = run_sampler(theirs_scheduler, model, latents, 9, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-3)


@pytest.mark.parametrize("schedule", ["Karras", "Exponential", "Align Your Steps", "Beta", "KL Optimal"])
@pytest.mark.parametrize("steps", [4, 12])
def test_euler_a_matches_k_diffusion_on_any_schedule_with_the_same_noise(schedule, steps):
    latents = _latents()
    sigmas = REFERENCE_SCHEDULES[schedule](SD15_SCHEDULER_CONFIG, steps)
    expected = sample_euler_ancestral(latents * sigmas[0], sigmas, torch.Generator().manual_seed(9))
    got = run_sampler(
        fresh_scheduler("Euler a", schedule), GaussianDataModel(SD15_SCHEDULER_CONFIG), latents.float(), steps,
        generator=torch.Generator().manual_seed(9),
    )
    # The toy model sees diffusers' model timesteps (sigma mapped back to t), interpolated in alpha.
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=2e-3)


@pytest.mark.parametrize("schedule", ["Align Your Steps", "Simple", "Beta"])
def test_dpmpp_2m_on_a_custom_schedule_matches_k_diffusion(schedule):
    latents = _latents()
    sigmas = REFERENCE_SCHEDULES[schedule](SD15_SCHEDULER_CONFIG, 10)
    expected = sample_dpmpp_2m(latents * sigmas[0], sigmas)
    got = run_sampler(fresh_scheduler("DPM++ 2M", schedule), GaussianDataModel(SD15_SCHEDULER_CONFIG), latents.float(), 10)
    # As for Karras (test_kdiffusion_oracle.py): rounded model timesteps, sqrt(1 + sigma_max^2) start.
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=1e-2)


@pytest.mark.parametrize("schedule", ["Karras", "DDIM", "Beta"])
@pytest.mark.parametrize("sampler", ["DPM++ 2M SDE", "DPM++ 2M SDE Heun"])
def test_dpmpp_2m_sde_disperses_as_k_diffusion_on_each_schedule(sampler, schedule):
    """Noise draws differ (Brownian tree vs per-step Gaussian), so compare the distributions."""
    latents = torch.randn(4, 4, 32, 32, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    sigmas = REFERENCE_SCHEDULES[schedule](SD15_SCHEDULER_CONFIG, 20)
    expected = sample_dpmpp_2m_sde(latents * sigmas[0], sigmas, torch.Generator().manual_seed(1), heun=sampler.endswith("Heun"))
    got = run_sampler(
        fresh_scheduler(sampler, schedule), GaussianDataModel(SD15_SCHEDULER_CONFIG), latents.float(), 20,
        generator=torch.Generator().manual_seed(1),
    )
    # Measured: std 0.513-0.799 by schedule, mixkit within 0.013 of the reference in each.
    assert got.mean().item() == pytest.approx(expected.mean().item(), abs=0.03)
    assert got.std().item() == pytest.approx(expected.std().item(), abs=0.03)


@pytest.mark.parametrize("schedule", ["Polyexponential", "KL Optimal", "Align Your Steps", "Simple", "Normal", "DDIM", "Beta"])
def test_txt2img_runs_every_added_schedule_type(sd1_pipe, schedule):
    result = sd1_pipe(prompt="a red circle", seed=3, sampler="Euler a", schedule_type=schedule, steps=7, width=64, height=64)
    pixels = np.asarray(result.images[0], dtype=np.float64)
    assert np.isfinite(pixels).all() and pixels.std() > 0
    assert f"Schedule type: {schedule}," in result.infotexts[0]
    # A1111 records its Beta distribution's parameters with the schedule.
    assert ("Beta schedule alpha: 0.6, Beta schedule beta: 0.6" in result.infotexts[0]) == (schedule == "Beta")


def test_a_schedule_whose_first_timesteps_repeat_runs_every_step(sd1_pipe):
    # Beta at 60 steps starts 14.61, 14.60, ...: both round to model timestep 999, where diffusers
    # would start at the second and index past the end of its sigmas.
    steps = []
    sd1_pipe(prompt="a red circle", seed=3, sampler="DPM++ 2M", schedule_type="Beta", steps=60, width=64, height=64,
             callback=lambda progress: steps.append(progress.step))
    assert steps[-1] == 60


@pytest.mark.parametrize("begin", [0, 4])
def test_lms_matches_k_diffusion_also_from_partway_down_the_schedule(begin):
    # img2img starts at step `begin` (set_begin_index); k-diffusion's order counts derivatives from there.
    steps, latents = 10, _latents()
    sigmas = REFERENCE_SCHEDULES["Uniform"](SD15_SCHEDULER_CONFIG, steps)
    init = torch.full_like(latents, 0.3)
    expected = sample_lms(init + latents * sigmas[begin], sigmas[begin:])
    scheduler = fresh_scheduler("LMS", "Uniform")
    scheduler.set_timesteps(steps)
    scheduler.set_begin_index(begin)
    model = GaussianDataModel(SD15_SCHEDULER_CONFIG)
    x = (init + latents * sigmas[begin]).float()
    for t in scheduler.timesteps[begin:]:
        x = scheduler.step(model(scheduler.scale_model_input(x, t), t), t, x).prev_sample
    torch.testing.assert_close(x.double(), expected, rtol=0, atol=1e-3)


@pytest.mark.parametrize("steps", [1, 2, 10, 30])
def test_karras_is_diffusers_karras_conversion_at_the_models_range(steps):
    # diffusers' `_convert_to_karras` (the oracle) evaluates Karras et al. 2022 eq. 5 with rho = 7 between the ends of
    # the sigmas it is given, in float64 with the same operations: the values are equal to the last bit.
    scheduler = EulerDiscreteScheduler.from_config(SD15_SCHEDULER_CONFIG)
    alphas = scheduler.alphas_cumprod.double().numpy()
    training_sigmas = np.sqrt((1.0 - alphas) / alphas)
    oracle = scheduler._convert_to_karras(torch.from_numpy(training_sigmas[::-1].copy()), steps)
    ours = karras_sigmas(steps, training_sigmas)
    np.testing.assert_array_equal(ours[:-1], oracle)
    assert ours[-1] == 0.0 and ours[0] == training_sigmas[-1]
