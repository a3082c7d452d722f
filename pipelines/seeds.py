"""WebUI seed semantics: image k of a generation uses seed + k, with its own generator.

Each image owns a CPU `torch.Generator` seeded with its seed; its initial noise and every noise
draw of an ancestral/SDE sampler come from that generator alone. So re-running one image's seed
with batch size 1 reproduces that image, as in AUTOMATIC1111's WebUI with RNG source "CPU"
(its initial noise is `torch.randn((4, h/8, w/8))` after seeding the same way).
"""

from __future__ import annotations

import random

from pipelines.params import RANDOM_SEED_MAX


def resolve_seed(seed: int) -> int:
    """-1 means a fresh random seed, as in the WebUI."""
    return random.randint(0, RANDOM_SEED_MAX) if seed == -1 else seed


def image_seeds(first_seed: int, count: int) -> list[int]:
    """seed + k, without wrapping at 2**32: A1111 seeds image k of 4294967295 with 4294967296, so its infotexts
    carry such seeds, and they must reproduce here (torch seeds generators up to 2**64 - 1)."""
    return [first_seed + k for k in range(count)]


def image_generators(seeds: list[int]):
    import torch

    return [torch.Generator("cpu").manual_seed(seed) for seed in seeds]


def initial_noise(generators, shape: tuple[int, int, int]):
    """One [C, h, w] draw per generator, stacked: independent of batch size by construction."""
    import torch

    return torch.stack([torch.randn(shape, generator=g, dtype=torch.float32) for g in generators])
