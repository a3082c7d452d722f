"""Per-image reproducible sampling noise across the diffusers schedulers we use.

A batch must give image k the same result as running seed+k alone. Two mechanisms exist:
schedulers that draw with `randn_tensor` accept a list of generators (one per image, each
generating its own image's noise), and DPMSolverSDEScheduler draws from a Brownian tree that
accepts a list of seeds (one tree per image) but ignores generators.

A generator is a CPU torch.Generator or, for A1111's RNG source NV, a `mixkit.random.PhiloxGenerator`, which
torch cannot draw from: every sampler draws its step noise through `sampler_noise`, which takes either.
"""

from __future__ import annotations

import inspect
from typing import Sequence

import torch


def extra_step_kwargs(scheduler, generator: torch.Generator | list[torch.Generator] | None) -> dict:
    """The `generator` keyword for `scheduler.step`, only if that scheduler's `step` accepts it.

    Heun, KDPM2, LMS, PNDM, UniPC and DPMSolverSDE raise TypeError on an unexpected `generator=`.
    """
    if generator is None or "generator" not in inspect.signature(scheduler.step).parameters:
        return {}
    return {"generator": generator}


def sampler_noise(shape, generator, device, dtype) -> torch.Tensor:
    """A step's noise from the image's generator (or a list of them, one per row of `shape`), as `randn_tensor`
    draws it; a Philox (NV) generator gives its next float32 draw, moved to `device` / `dtype` afterwards, as
    A1111's `randn_without_seed` does."""
    from diffusers.utils.torch_utils import randn_tensor

    from pipelines.rng_source import is_philox

    generators = generator if isinstance(generator, (list, tuple)) else [generator]
    if not any(is_philox(item) for item in generators):
        return randn_tensor(shape, generator=generator, device=device, dtype=dtype)
    if len(generators) == 1:
        return generators[0].randn(shape).to(device=device, dtype=dtype)
    row = (1, *shape[1:])
    return torch.cat([item.randn(row) for item in generators]).to(device=device, dtype=dtype)


def seed_brownian_noise(scheduler, seeds: Sequence[int]) -> None:
    """Give a Brownian-tree scheduler one seed per image; a no-op for other schedulers.

    Call after `set_timesteps` and before the first `step`. Without it DPMSolverSDEScheduler
    seeds its tree from torch's global RNG and a run cannot be reproduced.
    """
    if not hasattr(scheduler, "noise_sampler_seed"):
        return
    seeds = list(seeds)
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise ValueError(f"seeds must be a non-empty list of ints, one per image, got {seeds!r}")
    # A list (even of one) makes the tree "batched": one independent tree per image.
    scheduler.noise_sampler_seed = seeds
    scheduler.noise_sampler = None
