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
    scheduler_class: type, sigma_function: SigmaFunction, sdxl: bool, discard_penultimate: bool = False
) -> type:
    """`scheduler_class` with its Karras conversion replaced by `sigma_function` (build it with use_karras_sigmas).

    `discard_penultimate` is A1111's `discard_next_to_last_sigma` (DPM2, DPM2 a): the schedule is made for
    steps + 1 and its smallest non-final sigma dropped, so the last step goes straight to the end.
    """

    def _convert_to_karras(self, in_sigmas, num_inference_steps: int | None = None) -> np.ndarray:
        steps = num_inference_steps or self.num_inference_steps
        if hasattr(self, "schedule_training_sigmas"):  # a sampler over a subset of them (A1111's LCM: 50)
            training_sigmas = self.schedule_training_sigmas()
        else:
            alphas = self.alphas_cumprod.double().cpu().numpy()
            training_sigmas = np.sqrt((1.0 - alphas) / alphas)
        # The scheduler appends its own last sigma (0, or sigma_min where its config says so).
        if discard_penultimate:
            return sigma_function(steps + 1, training_sigmas, sdxl)[:-2]
        return sigma_function(steps, training_sigmas, sdxl)[:-1]

    name = f"{scheduler_class.__name__}With{sigma_function.__name__.title().replace('_', '')}"
    if discard_penultimate:
        name += "DiscardPenultimate"
    return type(name, (scheduler_class,), {"_convert_to_karras": _convert_to_karras, "__module__": __name__})
