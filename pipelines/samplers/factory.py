"""Build a configured diffusers scheduler from an A1111 sampler name and a model's config."""

from __future__ import annotations

import importlib.util
import inspect
from typing import Any, Mapping

import diffusers

from mixkit.errors import UnknownNameError
from pipelines.samplers.a1111_timesteps import A1111DDIMScheduler, A1111PLMSScheduler
from pipelines.samplers.a1111_unipc import A1111UniPCScheduler
from pipelines.samplers.catalog import SAMPLERS, find_sampler, refusal_reason
from pipelines.samplers.custom_sigmas import with_sigma_schedule
from pipelines.samplers.dpm2_ancestral import KDPM2AncestralEtaScheduler
from pipelines.samplers.ddim_cfgpp import A1111DDIMCFGPPScheduler
from pipelines.samplers.dpm_adaptive import DPMAdaptiveScheduler
from pipelines.samplers.dpm_fast import DPMFastScheduler
from pipelines.samplers.dpmpp_2m_sde import BrownianDPMSolverMultistepScheduler
from pipelines.samplers.dpmpp_3m_sde import BrownianDPMSolverPlusPlus3MSDEScheduler
from pipelines.samplers.dpmpp_sde import DPMSolverSDEEtaScheduler
from pipelines.samplers.dpmpp_2s_ancestral import DPMSolverPlusPlus2SAncestralScheduler
from pipelines.samplers.euler_ancestral import EulerAncestralAnyScheduleScheduler
from pipelines.samplers.lcm import A1111LCMScheduler
from pipelines.samplers.lms import LMSScheduler
from pipelines.samplers.restart import RestartScheduler
from pipelines.samplers.schedule_types import (
    SCHEDULE_TYPES,
    SIGMA_SCHEDULE_FLAGS,
    get_schedule_type,
    schedule_name_variants,
)
from pipelines.samplers.spec import SamplerSpec
from pipelines.sampler_parameters import CHURN_SAMPLERS

# Facts about how the *model* was trained; everything else is the sampler's choice. Keeping
# `prediction_type` is what makes v-prediction (SD 2.x 768) models work with every sampler.
MODEL_SCHEDULE_KEYS = (
    "num_train_timesteps",
    "beta_start",
    "beta_end",
    "beta_schedule",
    "trained_betas",
    "prediction_type",
    "rescale_betas_zero_snr",
)

# Schedulers mixkit adds where diffusers has no faithful counterpart; the rest come from diffusers.
MIXKIT_SCHEDULERS = {
    cls.__name__: cls for cls in (
        A1111DDIMCFGPPScheduler, A1111DDIMScheduler, A1111LCMScheduler, A1111PLMSScheduler, A1111UniPCScheduler,
        BrownianDPMSolverMultistepScheduler, BrownianDPMSolverPlusPlus3MSDEScheduler, DPMAdaptiveScheduler,
        DPMFastScheduler,
        DPMSolverPlusPlus2SAncestralScheduler, DPMSolverSDEEtaScheduler, EulerAncestralAnyScheduleScheduler,
        KDPM2AncestralEtaScheduler, LMSScheduler, RestartScheduler,
    )
}

# Suffixes of old k-diffusion aliases ("k_dpmpp_2m_ka") that named a schedule before A1111 1.9.
_OLD_ALIAS_SUFFIXES = {"_ka": "Karras", "_exp": "Exponential"}


def resolve_sampler(sampler_name: str, schedule_type: str = "Automatic") -> tuple[SamplerSpec, str]:
    """Resolve a sampler name and schedule type to (spec, concrete schedule type name).

    Accepts pre-1.9 A1111 names such as "DPM++ 2M Karras" or "k_dpmpp_2m_ka", which carry the
    schedule type in the sampler name, so infotext pasted from older versions keeps working.
    "Automatic" becomes the sampler's own default (e.g. "Karras" for "DPM++ 2M").
    """
    if not isinstance(sampler_name, str):
        raise TypeError(f"sampler_name must be a string, got {type(sampler_name).__name__} {sampler_name!r}")
    if not isinstance(schedule_type, str):
        raise TypeError(f"schedule_type must be a string, got {type(schedule_type).__name__} {schedule_type!r}")
    requested = get_schedule_type(schedule_type).name
    spec, implied = _split_sampler_name(sampler_name.strip())
    if implied is not None and requested not in ("Automatic", implied):
        raise ValueError(
            f"Sampler name {sampler_name!r} already implies schedule type {implied!r}, "
            f"but schedule type {requested!r} was also given; pass {spec.name!r} with the schedule type you want."
        )
    chosen = implied or requested
    if spec.schedule_types == ("Automatic",):
        # A1111 ignores the schedule type for its timestep samplers (DDIM, PLMS, UniPC), so a pasted
        # "DDIM, Schedule type: Karras" or a Settings default of Karras runs rather than fails.
        return spec, "Automatic"
    if chosen not in spec.schedule_types:
        raise ValueError(
            f"Schedule type {chosen!r} does not apply to sampler {spec.name!r}; "
            f"valid schedule types for it: {', '.join(spec.schedule_types)}."
        )
    return spec, spec.default_schedule if chosen == "Automatic" else chosen


def _split_sampler_name(name: str) -> tuple[SamplerSpec, str | None]:
    spec = find_sampler(name)
    if spec is not None:
        return spec, None
    for suffix, schedule in _OLD_ALIAS_SUFFIXES.items():
        if name.casefold().endswith(suffix) and (spec := find_sampler(name[: -len(suffix)])) is not None:
            return spec, schedule
    for schedule_name in SCHEDULE_TYPES.names():
        for variant in schedule_name_variants(SCHEDULE_TYPES.get(schedule_name)):
            tail = " " + variant
            if name.casefold().endswith(tail.casefold()) and (spec := find_sampler(name[: -len(tail)])) is not None:
                return spec, schedule_name
    if (reason := refusal_reason(name)) is not None:
        raise ValueError(reason)
    raise UnknownNameError(SAMPLERS.unknown_message(name))


def check_sampler_steps(sampler_name: str, steps: int) -> None:
    """Refuse a step count the sampler cannot run, or runs without a model call (checked before any work)."""
    spec, _ = resolve_sampler(sampler_name)
    if steps < spec.min_steps:
        raise ValueError(f"Sampler {spec.name!r} needs at least {spec.min_steps} steps, got {steps}: at {steps} its "
                         "walk makes no model call and the image would be the starting noise (as in A1111); use "
                         f"{spec.min_steps} or more steps, or Euler for single-step models.")
    if spec.max_steps is not None and steps > spec.max_steps:
        raise ValueError(f"Sampler {spec.name!r} runs at most {spec.max_steps} steps here, got {steps}; "
                         "use fewer steps or another sampler.")


def sampler_eta(sampler_name: str, eta: float | None) -> float | None:
    """The eta the sampler runs with (None: it has none).

    A1111 applies its eta setting only to samplers with an eta argument and ignores it for the others (a
    client sending the default `"eta": 0` with DPM++ 2M gets DPM++ 2M); so does this.
    """
    if eta is not None and (isinstance(eta, bool) or not isinstance(eta, (int, float)) or not 0.0 <= eta <= 1.0):
        raise ValueError(f"eta must be a number in [0, 1] (or None for the sampler's default), got {eta!r}.")
    spec, _ = resolve_sampler(sampler_name)
    if spec.eta_default is None:
        return None
    if eta is None:
        return spec.eta_default
    return float(eta)


def scheduler_config_for(
    spec: SamplerSpec, schedule_name: str, base_scheduler_config: Mapping[str, Any], accepted: set[str]
) -> dict[str, Any]:
    """The config for `spec`'s scheduler class: model facts, then sampler, then schedule choices."""
    config = {key: base_scheduler_config[key] for key in MODEL_SCHEDULE_KEYS if key in base_scheduler_config}
    config.update(dict.fromkeys(SIGMA_SCHEDULE_FLAGS, False))
    config.update(spec.config_overrides)
    schedule = SCHEDULE_TYPES.get(schedule_name)
    config.update(schedule.config_overrides or {})
    if schedule.ends_at_sigma_min:
        config["final_sigmas_type"] = "sigma_min"  # where the class has the switch; others end at 0
    return {key: value for key, value in config.items() if key in accepted}


def make_scheduler(
    sampler_name: str, base_scheduler_config: Mapping[str, Any], schedule_type: str = "Automatic", *,
    sdxl: bool = False, parameters=None,
) -> diffusers.SchedulerMixin:
    """A fresh diffusers scheduler reproducing the A1111 sampler `sampler_name` for this model.

    `base_scheduler_config` is the model's own scheduler config (`pipe.scheduler.config` or the
    parsed `scheduler/scheduler_config.json`); its betas and `prediction_type` are kept. `sdxl`
    picks the SDXL variant of schedules that have one ("Align Your Steps"), as A1111 does. `parameters` (a
    `pipelines.sampler_parameters.SamplerParameters`, default: none changed) sets A1111's schedule bounds, rho,
    forced discard of the penultimate sigma, Euler/Heun/DPM2 churn, the Beta schedule's shape, the noise schedule
    (Zero Terminal SNR) and fp16 alphas_cumprod for every sampler, and UniPC's variant, skip type and order.
    """
    if not isinstance(base_scheduler_config, Mapping):
        raise TypeError(
            "base_scheduler_config must be a mapping such as pipe.scheduler.config, "
            f"got {type(base_scheduler_config).__name__}"
        )
    spec, schedule_name = resolve_sampler(sampler_name, schedule_type)
    for package in spec.requires:
        if importlib.util.find_spec(package) is None:
            raise ImportError(
                f"Sampler {spec.name!r} needs the optional package {package!r} "
                f"(used by diffusers' {spec.scheduler_class_name}); install it with `pip install {package}`."
            )
    scheduler_class = scheduler_class_of(spec)
    schedule = SCHEDULE_TYPES.get(schedule_name)
    if schedule.sigma_function is not None:
        discard = spec.discard_penultimate_sigma if parameters is None else parameters.discards_penultimate(spec)
        kwargs = () if parameters is None else tuple(sorted(parameters.schedule_kwargs(schedule).items()))
        scheduler_class = with_sigma_schedule(scheduler_class, schedule.sigma_function, bool(sdxl), discard, kwargs)
    if parameters is not None and parameters.churns and spec.name in CHURN_SAMPLERS:  # others ignore it, as A1111
        from pipelines.samplers.churn import with_churn

        scheduler_class = with_churn(scheduler_class, spec.name)
    accepted = set(inspect.signature(scheduler_class.__init__).parameters) - {"self"}
    if base_scheduler_config.get("rescale_betas_zero_snr") and "rescale_betas_zero_snr" not in accepted:
        raise ValueError(
            f"The model's scheduler config sets rescale_betas_zero_snr=True, which diffusers' "
            f"{spec.scheduler_class_name} (sampler {spec.name!r}) cannot honour; choose one of: "
            f"{', '.join(zero_snr_samplers())}."
        )
    config = scheduler_config_for(spec, schedule_name, base_scheduler_config, accepted)
    unipc = parameters is not None and hasattr(scheduler_class, "a1111_config")
    if unipc:  # A1111's UniPC variant, order and lower order final
        config.update(scheduler_class.a1111_config(parameters))
    scheduler = scheduler_class(**config)
    if unipc:
        scheduler.use_a1111_options(parameters)
    if parameters is not None and parameters.changes_alphas_cumprod:  # Zero Terminal SNR, fp16 downcast
        from pipelines.samplers.alphas_cumprod import use_alphas_cumprod

        use_alphas_cumprod(scheduler, parameters)
    return scheduler


def start_at_first_step(scheduler) -> None:
    """Make a scheduler's first `step` the first of its schedule, even when timesteps repeat.

    diffusers finds its place from the timestep it is given and, for a timestep listed twice,
    takes the *second* (its img2img guess). Schedules whose first sigmas round to the same model
    timestep (Beta at 60 steps: 999, 999, ...) would then start one step in and run off the end.
    img2img sets its own begin index afterwards.
    """
    if hasattr(scheduler, "set_begin_index"):
        scheduler.set_begin_index(0)


def initial_noise_scale(scheduler) -> float:
    """What N(0, I) noise is multiplied by to start sampling at the schedule's first sigma, as k-diffusion does.

    diffusers' multistep DPM-Solver keeps samples in variance-preserving form and starts at unit noise,
    i.e. at sigma sqrt(1 + sigma_max^2) (14.649 for SD) where k-diffusion's DPM++ 2M starts at sigma_max
    (14.615): 0.23% too much noise. Scaled by sigma_max / sqrt(1 + sigma_max^2) it starts where A1111 does.
    The timestep samplers (DDIM, PLMS, UniPC) start at unit noise in A1111 too; LCM, a k-diffusion sampler
    there, at sigmas[0] (its scheduler's init_noise_sigma).
    """
    if isinstance(scheduler, diffusers.DPMSolverMultistepScheduler):
        sigma_max = float(scheduler.sigmas[0])
        return sigma_max / (1.0 + sigma_max**2) ** 0.5
    return float(scheduler.init_noise_sigma)


def scheduler_class_of(spec: SamplerSpec) -> type:
    """The scheduler class named by `spec` (mixkit's own first, then diffusers')."""
    return MIXKIT_SCHEDULERS.get(spec.scheduler_class_name) or getattr(diffusers, spec.scheduler_class_name)


def zero_snr_samplers() -> list[str]:
    """Samplers whose diffusers class supports zero-terminal-SNR rescaled betas."""
    return [
        name
        for name, spec in SAMPLERS.items()
        if "rescale_betas_zero_snr" in inspect.signature(scheduler_class_of(spec).__init__).parameters
    ]


def list_samplers() -> list[dict[str, Any]]:
    """Samplers shaped like A1111's `/sdapi/v1/samplers` items: {"name", "aliases", "options"}.

    `options` keeps A1111's keys ("scheduler", "discard_next_to_last_sigma", "second_order", "brownian_noise",
    "uses_ensd") and
    adds mixkit's "schedule_types" and "stochastic".
    """
    items = []
    for name, spec in SAMPLERS.items():
        options: dict[str, Any] = {}
        if spec.default_schedule not in ("Automatic", "Uniform"):
            options["scheduler"] = SCHEDULE_TYPES.get(spec.default_schedule).internal_name
        if spec.discard_penultimate_sigma:
            options["discard_next_to_last_sigma"] = True
        if spec.config_overrides.get("solver_type") == "heun":
            options["solver_type"] = "heun"  # A1111 marks DPM++ 2M SDE Heun so
        if spec.second_order:
            options["second_order"] = True
        if spec.noise_source == "brownian_seeds":
            options["brownian_noise"] = True
        if spec.ancestral:
            options["uses_ensd"] = True
        options["schedule_types"] = list(spec.schedule_types)
        options["stochastic"] = spec.stochastic
        items.append({"name": name, "aliases": list(spec.aliases), "options": options})
    return items
