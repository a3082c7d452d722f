"""WebUI seed semantics: image k of a generation uses seed + k, with its own generator (a caller's too).

Each image owns a CPU `torch.Generator` seeded with its seed; its initial noise and every noise
draw of an ancestral/SDE sampler come from that generator alone. So re-running one image's seed
with batch size 1 reproduces that image, as in AUTOMATIC1111's WebUI with RNG source "CPU"
(its initial noise is `torch.randn((4, h/8, w/8))` after seeding the same way).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from pipelines.params import RANDOM_SEED_MAX, SEED_MAX

if TYPE_CHECKING:
    import torch


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


def generator_seeds(generator, total: int) -> tuple[list[int], list]:
    """(seed, generator) per image for a caller's `generator=`: a CPU torch.Generator, or a list/tuple of one per image.

    A1111 has no generator argument: image k uses seed + k with a generator of its own (modules/processing.py,
    process_images_inner: `p.all_seeds = [int(seed) + x ...]`, one noise generator per seed), which is what makes
    each image's recorded seed reproduce it alone. diffusers draws a whole batch from one shared generator, whose
    later images no seed describes. So a single generator stands for its seed, A1111's way: image 0 uses it and
    image k a generator of its own seeded seed + k, and `seeds` (the infotexts' `Seed`) reproduce every image.
    A generator that already drew numbers is no longer described by `initial_seed()`; its seed is then drawn
    from it (`seed_of_generator`), so the call still follows its state and records an honest seed.
    """
    generators = check_generators(generator, total)
    if len(generators) == 1 and total > 1:
        first_seed, first = seed_of_generator(generators[0])
        seeds = image_seeds(first_seed, total)
        return seeds, [first, *image_generators(seeds[1:])]
    pairs = [seed_of_generator(g) for g in generators]
    return [seed for seed, _ in pairs], [g for _, g in pairs]


def check_generators(generator, total: int) -> list:
    """`generator=` as a list: one CPU torch.Generator, or one per image, each a different object."""
    import torch

    allowed = "a CPU torch.Generator, or a list of one per image"
    if isinstance(generator, torch.Generator):
        generators = [generator]
    elif isinstance(generator, (list, tuple)):
        generators = list(generator)
        if len(generators) != total:
            raise ValueError(f"Got {len(generators)} generators for {total} images; pass one per image or a single one.")
    else:
        raise TypeError(f"generator= must be {allowed}, got {type(generator).__name__}: {generator!r}")
    for index, item in enumerate(generators):
        where = "generator=" if isinstance(generator, torch.Generator) else f"generator[{index}]"
        if not isinstance(item, torch.Generator):
            raise TypeError(f"{where} must be a torch.Generator ({allowed}), got {type(item).__name__}: {item!r}")
        if item.device.type != "cpu":
            raise ValueError(f"{where} is a {item.device} generator; mixkit draws its noise on the CPU (the infotext's "
                             "`RNG: CPU`, as A1111's default): pass torch.Generator('cpu').manual_seed(n)")
    if len({id(g) for g in generators}) != len(generators):
        raise ValueError("generator= lists the same generator more than once: those images would share one random "
                         "stream and their seeds would not reproduce them; pass a different generator per image, "
                         "or a single generator for the whole batch")
    return generators


def seed_of_generator(generator) -> tuple[int, "torch.Generator"]:
    """(seed, generator to draw an image from) such that a fresh generator seeded with `seed` draws the same noise.

    A freshly seeded generator is its `initial_seed()`. One that already drew numbers is not, and neither is one
    seeded above the seeds an infotext can carry (`generator.seed()` picks 64-bit ones; SEED_MAX is 2**53 - 1):
    then a seed is drawn from it below 2**32 (the range of A1111's random seeds) and the image gets a generator
    seeded with that.
    """
    import torch

    seed = generator.initial_seed()
    fresh = torch.equal(generator.get_state(), torch.Generator("cpu").manual_seed(seed).get_state())
    if fresh and seed <= SEED_MAX:
        return seed, generator
    drawn = int(torch.randint(0, RANDOM_SEED_MAX + 1, (1,), generator=generator))
    return drawn, torch.Generator("cpu").manual_seed(drawn)
