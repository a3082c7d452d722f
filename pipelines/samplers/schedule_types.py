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
- "Beta" is not offered: diffusers' `use_beta_sigmas` spreads the beta quantiles linearly in
  *sigma*, while A1111 spreads them over *timestep indices*, a different schedule.
"""

from __future__ import annotations

from mixkit.registry import Registry

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
        "SGM Uniform", "sgm_uniform", aliases=("SGMUniform",), config_overrides={"timestep_spacing": "trailing"},
        description="timesteps evenly spaced, last step ending above t=0 (Stability's SGM code)",
    )
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
