"""A1111 "Schedule type" names mapped onto diffusers' sigma-schedule config keys.

Measured against k-diffusion's schedules on SD 1.5's training schedule (see the tests):
- "Uniform" is k-diffusion's `DiscreteSchedule.get_sigmas(n)`: timesteps `linspace(999, 0, n)`,
  then sigma 0. diffusers' `timestep_spacing="linspace"` gives the same sigmas for the Euler,
  Heun, LMS, KDPM2 and DPMSolverSDE classes. The multistep DPM-Solver/UniPC classes drop t=0
  under every spacing, so those samplers do not offer "Uniform".
- "Karras" / "Exponential": diffusers computes them from the *interpolated* sigmas' end points,
  so `timestep_spacing` must be "linspace" for sigma_max/sigma_min to be the training schedule's
  sigma(999)/sigma(0), as k-diffusion uses. "leading" (SD 1.5's config default) would start the
  schedule below sigma_max.
- "SGM Uniform" is `linspace(999, 0, n + 1)[:-1]` in timesteps; diffusers' "trailing" is
  `999, 999 - 1000/n, ...`, within 0.2% of it.
- "Polyexponential" at A1111's default rho = 1 is "Exponential"; "Normal" (A1111's
  `normal_scheduler`, linspace from t(sigma_max) to t(sigma_min)) is "Uniform".
- "KL Optimal", "Align Your Steps", "Simple", "DDIM" and "Beta" have no diffusers switch: their
  sigmas come from sigma_schedules.py through custom_sigmas.py. A1111's "Beta" spreads the
  Beta(0.6, 0.6) quantiles linearly in sigma (its `beta_scheduler`).
"""

from __future__ import annotations

from mixkit.registry import Registry

from pipelines.samplers import sigma_schedules
from pipelines.samplers.spec import ScheduleType

SCHEDULE_TYPES: Registry[ScheduleType] = Registry("schedule type")

# Every sigma-schedule switch diffusers has; each schedule turns all of them off but its own, so a
# model config saved with e.g. `use_karras_sigmas: true` cannot leak into another schedule.
SIGMA_SCHEDULE_FLAGS = ("use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas", "use_lu_lambdas", "use_flow_sigmas")


def _register(schedule: ScheduleType) -> None:
    SCHEDULE_TYPES.register(schedule.name, schedule)


_register(ScheduleType("Automatic", "automatic", description="the sampler's own default, as in A1111"))
_register(
    ScheduleType(
        "Uniform", "uniform", config_overrides={"timestep_spacing": "linspace"},
        description="timesteps evenly spaced from the last training timestep to the first",
    )
)
_register(
    ScheduleType(
        "Karras", "karras", config_overrides={"timestep_spacing": "linspace", "use_karras_sigmas": True},
        description="Karras et al. 2022 (rho=7) between the training schedule's sigma_max and sigma_min",
    )
)
_register(
    ScheduleType(
        "Exponential", "exponential",
        config_overrides={"timestep_spacing": "linspace", "use_exponential_sigmas": True},
        description="sigmas evenly spaced in log(sigma)",
    )
)
_register(
    ScheduleType(
        "Polyexponential", "polyexponential",
        config_overrides={"timestep_spacing": "linspace", "use_exponential_sigmas": True},
        description="A1111's polyexponential at its default rho = 1, which is the exponential schedule",
    )
)
_register(
    ScheduleType(
        "SGM Uniform", "sgm_uniform", aliases=("SGMUniform",), config_overrides={"timestep_spacing": "trailing"},
        description="timesteps evenly spaced, last step ending above t=0 (Stability's SGM code)",
    )
)


def _register_custom(name: str, internal_name: str, function, description: str, **kwargs) -> None:
    # `use_karras_sigmas` routes set_timesteps through the conversion custom_sigmas.py replaces;
    # "linspace" keeps the interpolated training sigmas' end points at sigma(999) and sigma(0).
    _register(ScheduleType(
        name, internal_name, config_overrides={"timestep_spacing": "linspace", "use_karras_sigmas": True},
        description=description, sigma_function=function, **kwargs,
    ))


_register_custom(
    "KL Optimal", "kl_optimal", sigma_schedules.kl_optimal_sigmas,
    "uniform in arctan(sigma) from sigma_max to sigma_min (Sabour et al. 2024); ends at sigma_min, as in A1111",
    ends_at_sigma_min=True,
)
_register_custom(
    "Align Your Steps", "align_your_steps", sigma_schedules.align_your_steps_sigmas,
    "NVIDIA's optimised sigmas (SD 1.x or SDXL), log-linearly resampled to the step count",
)
_register_custom(
    "Simple", "simple", sigma_schedules.simple_sigmas,
    "every (1000 / steps)-th training sigma from the top (ComfyUI's simple)",
)
_register(
    ScheduleType(
        "Normal", "normal", config_overrides={"timestep_spacing": "linspace"},
        description="timesteps evenly spaced from t(sigma_max) to t(sigma_min): the same sigmas as Uniform",
    )
)
_register_custom(
    "DDIM", "ddim", sigma_schedules.ddim_sigmas,
    "the training sigmas at timesteps 1, 1 + k, ... (k = 1000 // steps); may run a step more, as in A1111",
)
_register_custom(
    "Beta", "beta", sigma_schedules.beta_sigmas,
    "Beta(0.6, 0.6) quantiles between sigma_min and sigma_max (Lee et al. 2024)",
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
