"""Run a diffusers scheduler on one of A1111's sigma schedules that diffusers lacks.

Every sigma-space diffusers scheduler computes its schedule in `set_timesteps` the same way: the
training sigmas, then, if `use_karras_sigmas` is set, `self._convert_to_karras(...)`, then model
timesteps from those sigmas, the final sigma and (for second-order samplers) the interleaving.
Overriding that one conversion in a subclass swaps the schedule while everything after it, the
timesteps, DPM2's midpoints, DPM++ SDE's second-order timesteps, stays diffusers' own code.
The subclass keeps the name's class attributes only, so deepcopies and per-image copies behave
as the base class. `tests/pipelines/samplers/test_sigma_schedules.py` checks, for every sampler
that offers these schedules, that the sigmas the scheduler ends up walking are A1111's.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

SigmaFunction = Callable[..., np.ndarray]


@functools.cache
def with_sigma_schedule(
    scheduler_class: type, sigma_function: SigmaFunction, sdxl: bool, discard_penultimate: bool = False,
    schedule_kwargs: tuple[tuple[str, float], ...] = (),
) -> type:
    """`scheduler_class` with its Karras conversion replaced by `sigma_function` (build it with use_karras_sigmas).

    `discard_penultimate` is A1111's `discard_next_to_last_sigma` (DPM2, DPM2 a): the schedule is made for
    steps + 1 and its smallest non-final sigma dropped, so the last step goes straight to the end.
    `schedule_kwargs`: A1111's "Schedule min/max sigma" and "Schedule rho" as (name, value) pairs the sigma function
    takes (`SamplerParameters.schedule_kwargs`), hashable so that the class is built once per setting.
    """
    # The schedule values are ours (`sigma_schedules`); only the hook's name is diffusers'. Without it the override
    # would never be called and the run would silently walk diffusers' default schedule.
    if not callable(getattr(scheduler_class, "_convert_to_karras", None)):
        import diffusers

        raise TypeError(f"{scheduler_class.__name__} has no `_convert_to_karras`, the step of diffusers' "
                        f"set_timesteps that A1111's schedule types replace; diffusers {diffusers.__version__} lacks it: "
                        "install an earlier diffusers release that has it, or choose the schedule type Automatic")

    def _convert_to_karras(self, in_sigmas, num_inference_steps: int | None = None) -> np.ndarray:
        steps = num_inference_steps or self.num_inference_steps
        if hasattr(self, "schedule_training_sigmas"):  # a sampler over a subset of them (A1111's LCM: 50)
            training_sigmas = self.schedule_training_sigmas()
        else:
            alphas = self.alphas_cumprod.double().cpu().numpy()
            training_sigmas = np.sqrt((1.0 - alphas) / alphas)
        kwargs = _model_relative(dict(schedule_kwargs), training_sigmas)
        # The scheduler appends its own last sigma (0, or sigma_min where its config says so).
        if discard_penultimate:
            return sigma_function(steps + 1, training_sigmas, sdxl, **kwargs)[:-2]
        return sigma_function(steps, training_sigmas, sdxl, **kwargs)[:-1]

    name = f"{scheduler_class.__name__}With{sigma_function.__name__.title().replace('_', '')}"
    if discard_penultimate:
        name += "DiscardPenultimate"
    if schedule_kwargs:
        name += "".join(f"{key.title().replace('_', '')}{value:g}" for key, value in schedule_kwargs).replace(".", "_")
    return type(name, (scheduler_class,), {"_convert_to_karras": _convert_to_karras, "__module__": __name__})


def _model_relative(kwargs: dict[str, float], training_sigmas: np.ndarray) -> dict[str, float]:
    """The bounds that differ from the model's own, checked to leave a range.

    A1111 passes a bound only when it is not the model's float32 sigma (`opts.sigma_min != m_sigma_min`), so a
    setting equal to it runs the schedule as it is; the float64 sigmas here then give the unchanged schedule.
    """
    from pipelines.sampler_parameters import SamplerParameters, check_schedule_range

    model_min, model_max = float(np.float32(training_sigmas[0])), float(np.float32(training_sigmas[-1]))
    if kwargs.get("sigma_min") == model_min:
        del kwargs["sigma_min"]
    if kwargs.get("sigma_max") == model_max:
        del kwargs["sigma_max"]
    bounds = SamplerParameters(sigma_min=kwargs.get("sigma_min", 0.0), sigma_max=kwargs.get("sigma_max", 0.0))
    check_schedule_range(bounds, float(training_sigmas[0]), float(training_sigmas[-1]))
    return kwargs
