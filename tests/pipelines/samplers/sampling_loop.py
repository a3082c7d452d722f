"""The standard diffusers denoising loop, exactly as the txt2img pipeline runs it."""

from __future__ import annotations

import copy
import functools

import torch

from pipelines.samplers import extra_step_kwargs, initial_noise_scale, make_scheduler, seed_brownian_noise, start_at_first_step
from pipelines.samplers.dpm_adaptive import model_call_timesteps

from .kdiffusion_reference import SD2_V_SCHEDULER_CONFIG, SD15_SCHEDULER_CONFIG

CONFIGS = {"sd15-eps": SD15_SCHEDULER_CONFIG, "sd2-v": SD2_V_SCHEDULER_CONFIG}


@functools.cache
def _built(sampler: str, schedule: str, config_name: str):
    return make_scheduler(sampler, CONFIGS[config_name], schedule)


def fresh_scheduler(sampler: str, schedule: str = "Automatic", config_name: str = "sd15-eps"):
    """A copy of make_scheduler's result, built once per test session.

    KDPM2 and DPMSolverSDE run set_timesteps(1000) in __init__ (about a second on a busy CPU);
    building each (sampler, schedule, config) once keeps the parametrized suite fast.
    """
    return copy.deepcopy(_built(sampler, schedule, config_name))


def run_sampler(scheduler, model, latents: torch.Tensor, steps: int, generator=None, seeds=None) -> torch.Tensor:
    scheduler.set_timesteps(steps, device="cpu")
    start_at_first_step(scheduler)
    if seeds is not None:
        seed_brownian_noise(scheduler, seeds)
    x = latents * initial_noise_scale(scheduler)
    kwargs = extra_step_kwargs(scheduler, generator)
    for t in model_call_timesteps(scheduler):  # DPM adaptive decides each call as it goes
        model_input = scheduler.scale_model_input(x, t)
        x = scheduler.step(model(model_input, t), t, x, **kwargs).prev_sample
    return x


def img2img_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """The init latents and the noise the img2img comparisons with A1111's samplers start from."""
    return torch.full((1, 4, 8, 8), 0.3), torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(5))


def run_img2img(scheduler, model, init: torch.Tensor, noise: torch.Tensor, steps: int, t_enc: int,
                generator=None) -> torch.Tensor:
    """The img2img pipeline's walk: the `steps` schedule entered `t_enc` steps before its end (A1111's
    steps * strength), `init` noised to its first timestep."""
    scheduler.set_timesteps(steps)
    scheduler.set_img2img_start(t_enc)
    x = scheduler.add_noise(init, noise, scheduler.timesteps[:1])
    for t in scheduler.timesteps:
        x = scheduler.step(model(scheduler.scale_model_input(x, t), t), t, x, generator=generator).prev_sample
    return x
