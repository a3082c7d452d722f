"""Typed descriptions of a sampler and of a schedule type, as plain data.

A sampler here is *not* code: it is the recipe "diffusers class X with config Y" that reproduces
the AUTOMATIC1111 WebUI sampler of the same name. Keeping it as data lets the CLI, the HTTP API
and the tests enumerate every sampler without instantiating anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Literal, Mapping

NoiseSource = Literal["none", "generator", "brownian_seeds"]
"""Where a sampler's per-step noise comes from.

- "none": deterministic; the result depends only on the initial latents.
- "generator": drawn with `pipelines.samplers.noise.sampler_noise` (diffusers' `randn_tensor` for torch generators,
  Philox for NV) inside `scheduler.step`, so
  passing a list of per-image `torch.Generator`s gives per-image reproducible noise.
- "brownian_seeds": drawn from a Brownian tree (DPMSolverSDEScheduler) that ignores generators;
  call `seed_brownian_noise(scheduler, seeds)` with one seed per image instead.
"""


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class ScheduleType:
    """An A1111 "Schedule type" expressed as diffusers scheduler config keys.

    `config_overrides` is None only for "Automatic", which means "the sampler's own default".
    A schedule diffusers has no switch for carries `sigma_function` (see sigma_schedules.py),
    which replaces diffusers' Karras conversion (custom_sigmas.py); `ends_at_sigma_min` says its
    last sigma is the training sigma_min rather than 0.
    """

    name: str
    internal_name: str  # A1111's `Scheduler.name` ("karras"), used in its API `options`
    aliases: tuple[str, ...] = ()
    config_overrides: Mapping[str, Any] | None = None
    description: str = ""
    sigma_function: Callable[..., Any] | None = None
    ends_at_sigma_min: bool = False
    # A1111's `/sdapi/v1/schedulers` fields: the schedule's rho (-1: none) and whether it reads the model's sigmas
    default_rho: float = -1.0
    need_inner_model: bool = False
    # whether its sigma function takes A1111's "Schedule min/max sigma" settings (sampler_parameters.py)
    takes_sigma_range: bool = False

    def __post_init__(self) -> None:
        if self.config_overrides is not None:
            object.__setattr__(self, "config_overrides", _frozen(self.config_overrides))


@dataclass(frozen=True)
class SamplerSpec:
    """An A1111 sampler name mapped onto a diffusers scheduler class and its config."""

    name: str
    scheduler_class_name: str
    aliases: tuple[str, ...] = ()
    config_overrides: Mapping[str, Any] = field(default_factory=dict)
    schedule_types: tuple[str, ...] = ("Automatic",)
    default_schedule: str = "Automatic"
    stochastic: bool = False  # the result depends on noise drawn during sampling
    ancestral: bool = False  # A1111 "uses_ensd": noise is added back after each step
    second_order: bool = False  # two model evaluations per step (len(timesteps) ~ 2 * steps)
    noise_source: NoiseSource = "none"
    requires: tuple[str, ...] = ()  # optional Python packages the diffusers class needs
    max_steps: int | None = None  # where the diffusers class breaks beyond it (None: the caller's limit)
    # A1111's `discard_next_to_last_sigma` (DPM2, DPM2 a): schedule for steps + 1, its penultimate sigma dropped
    discard_penultimate_sigma: bool = False
    # A1111's eta: the k-diffusion samplers with an `eta` argument default to 1 ("Eta" in infotext when not 1),
    # DDIM to 0 ("Eta DDIM"); None: the sampler has no eta and ignores it, as in A1111. Every sampler with an eta
    # runs any value in [0, 1] (its scheduler class has an `eta` attribute).
    eta_default: float | None = None
    eta_infotext_key: str = "Eta"
    min_steps: int = 1  # fewer steps make no model call at all (A1111's DDIM/PLMS at 1 step return the noise)
    # A1111's timestep samplers (DDIM, PLMS, UniPC) blend inpainting's original into the model *input*; its
    # k-diffusion samplers blend the denoised estimate (pipelines/inpaint_blend.py)
    mask_before_denoising: bool = False
    notes: str = ""  # known, measured differences from A1111

    def __post_init__(self) -> None:
        object.__setattr__(self, "config_overrides", _frozen(self.config_overrides))
        if "Automatic" not in self.schedule_types:
            raise ValueError(f"sampler {self.name!r}: schedule_types must include 'Automatic'")
        if self.default_schedule not in self.schedule_types:
            raise ValueError(
                f"sampler {self.name!r}: default_schedule {self.default_schedule!r} "
                f"is not one of its schedule_types {self.schedule_types}"
            )
        if self.stochastic != (self.noise_source != "none"):
            raise ValueError(f"sampler {self.name!r}: stochastic must be True exactly when noise_source is not 'none'")
