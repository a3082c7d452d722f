"""Samplers by their AUTOMATIC1111 WebUI names, mapped onto configured diffusers schedulers."""

from pipelines.samplers.catalog import SAMPLERS, find_sampler
from pipelines.samplers.dpmpp_2s_ancestral import DPMSolverPlusPlus2SAncestralScheduler
from pipelines.samplers.factory import (
    MODEL_SCHEDULE_KEYS,
    check_sampler_steps,
    sampler_eta,
    initial_noise_scale,
    list_samplers,
    make_scheduler,
    resolve_sampler,
    start_at_first_step,
    zero_snr_samplers,
)
from pipelines.samplers.noise import extra_step_kwargs, seed_brownian_noise
from pipelines.samplers.schedule_types import SCHEDULE_TYPES, get_schedule_type
from pipelines.samplers.spec import SamplerSpec, ScheduleType

__all__ = [
    "DPMSolverPlusPlus2SAncestralScheduler",
    "MODEL_SCHEDULE_KEYS",
    "SAMPLERS",
    "SCHEDULE_TYPES",
    "SamplerSpec",
    "ScheduleType",
    "check_sampler_steps",
    "sampler_eta",
    "initial_noise_scale",
    "extra_step_kwargs",
    "find_sampler",
    "get_schedule_type",
    "list_samplers",
    "make_scheduler",
    "resolve_sampler",
    "seed_brownian_noise",
    "start_at_first_step",
    "zero_snr_samplers",
]
