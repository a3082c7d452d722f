"""A1111 1.10's "Schedule type" names, each a sigma function run inside a diffusers scheduler.

Every schedule's sigmas come from sigma_schedules.py (A1111's formulas), swapped in for diffusers'
Karras conversion by custom_sigmas.py, so the diffusers class keeps its own stepping, timestep
mapping and second-order interleaving while the sigmas are exactly k-diffusion's. Measured against
k-diffusion's formulas on SD 1.5's training schedule (see the tests). `timestep_spacing` is
"linspace" so that the interpolated sigmas diffusers hands the conversion (and ignores) span the
whole training range. "Automatic" means the sampler's own default.
"""

from __future__ import annotations

from mixkit.registry import Registry

from pipelines.samplers import sigma_schedules
from pipelines.samplers.spec import ScheduleType

SCHEDULE_TYPES: Registry[ScheduleType] = Registry("schedule type")

# Every sigma-schedule switch diffusers has; all are turned off before a schedule's own are set, so
# a model config saved with e.g. `use_exponential_sigmas: true` cannot leak into a schedule.
SIGMA_SCHEDULE_FLAGS = ("use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas", "use_lu_lambdas", "use_flow_sigmas")


def _register(schedule: ScheduleType) -> None:
    SCHEDULE_TYPES.register(schedule.name, schedule)


_register(ScheduleType("Automatic", "automatic", description="the sampler's own default, as in A1111"))


def _register_custom(name: str, internal_name: str, function, description: str, **kwargs) -> None:
    # `use_karras_sigmas` routes set_timesteps through the conversion custom_sigmas.py replaces;
    # "linspace" keeps the interpolated training sigmas' end points at sigma(999) and sigma(0).
    _register(ScheduleType(
        name, internal_name, config_overrides={"timestep_spacing": "linspace", "use_karras_sigmas": True},
        description=description, sigma_function=function, **kwargs,
    ))


_register_custom(
    "Uniform", "uniform", sigma_schedules.uniform_sigmas,
    "timesteps evenly spaced from the last training timestep to the first", need_inner_model=True,
)
_register_custom(
    "Karras", "karras", sigma_schedules.karras_sigmas,
    "Karras et al. 2022 (rho=7) between the training schedule's sigma_max and sigma_min", default_rho=7.0,
    takes_sigma_range=True,
)
_register_custom("Exponential", "exponential", sigma_schedules.exponential_sigmas, "sigmas evenly spaced in log(sigma)",
                 takes_sigma_range=True)
_register_custom(
    "Polyexponential", "polyexponential", sigma_schedules.polyexponential_sigmas,
    "A1111's polyexponential; at its default rho = 1 the exponential schedule", default_rho=1.0,
    takes_sigma_range=True,
)
_register_custom(
    "SGM Uniform", "sgm_uniform", sigma_schedules.sgm_uniform_sigmas,
    "timesteps evenly spaced, last step ending above t=0 (Stability's SGM code)", aliases=("SGMUniform",),
    need_inner_model=True, takes_sigma_range=True,
)
_register_custom(
    "KL Optimal", "kl_optimal", sigma_schedules.kl_optimal_sigmas,
    "uniform in arctan(sigma) from sigma_max to sigma_min (Sabour et al. 2024); ends at sigma_min, as in A1111",
    ends_at_sigma_min=True, takes_sigma_range=True,
)
_register_custom(
    "Align Your Steps", "align_your_steps", sigma_schedules.align_your_steps_sigmas,
    "NVIDIA's optimised sigmas (SD 1.x or SDXL), log-linearly resampled to the step count",
)
_register_custom(
    "Simple", "simple", sigma_schedules.simple_sigmas,
    "every (1000 / steps)-th training sigma from the top (ComfyUI's simple)", need_inner_model=True,
)
_register_custom(
    "Normal", "normal", sigma_schedules.normal_sigmas,
    "timesteps evenly spaced from t(sigma_max) to t(sigma_min): the same sigmas as Uniform at the model's range",
    need_inner_model=True, takes_sigma_range=True,
)
_register_custom(
    "DDIM", "ddim", sigma_schedules.ddim_sigmas,
    "the training sigmas at timesteps 1, 1 + k, ... (k = 1000 // steps); may run a step more, as in A1111",
    need_inner_model=True,
)
_register_custom(
    "Beta", "beta", sigma_schedules.beta_sigmas,
    "Beta(0.6, 0.6) quantiles between sigma_min and sigma_max (Lee et al. 2024)", need_inner_model=True,
    takes_sigma_range=True,
)

_ALIASES = {
    alias.casefold(): name
    for name, schedule in SCHEDULE_TYPES.items()
    for alias in (schedule.internal_name, *schedule.aliases)
}


def get_schedule_type(name: str) -> ScheduleType:
    """Look up a schedule type by A1111 label ("Karras"), internal name ("karras") or alias."""
    if isinstance(name, str) and name.casefold() in _ALIASES:
        return SCHEDULE_TYPES.get(_ALIASES[name.casefold()])
    return SCHEDULE_TYPES.get(name)


def schedule_name_variants(schedule: ScheduleType) -> tuple[str, ...]:
    """All spellings of a schedule type that may end an old-style sampler name ("DPM2 Karras")."""
    return (schedule.name, schedule.internal_name, *schedule.aliases)
