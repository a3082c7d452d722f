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
