"""WebUI seed semantics: image k of a generation uses seed + k, with its own generator (a caller's too).

Each image owns a CPU `torch.Generator` seeded with its seed; its initial noise and every noise
draw of an ancestral/SDE sampler come from that generator alone. So re-running one image's seed
with batch size 1 reproduces that image, as in AUTOMATIC1111's WebUI with RNG source "CPU"
(its initial noise is `torch.randn((4, h/8, w/8))` after seeding the same way). With RNG source "NV"
(`pipelines.rng_source`) each image owns a Philox generator of its seed instead, drawn from the same way.

A1111's "Extra" seed options change only the initial noise (modules/rng.py, `ImageRNG.first`): a variation
seed's noise slerped in by `subseed_strength`, and "resize seed from" drawing the noise at another size and
centring it. Their draws come from generators of their own, so the image's generator has drawn exactly one
full-size tensor afterwards either way, and the sampler's later noise (and ENSD's) is unchanged.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from pipelines.params import RANDOM_SEED_MAX, SEED_MAX
from pipelines.rng_source import copy_generator, generator_source, new_generator, randn_from

if TYPE_CHECKING:
    import torch


def resolve_seed(seed: int) -> int:
    """-1 means a fresh random seed, as in the WebUI."""
    return random.randint(0, RANDOM_SEED_MAX) if seed == -1 else seed


def image_seeds(first_seed: int, count: int, subseed_strength: float = 0.0) -> list[int]:
    """seed + k, without wrapping at 2**32: A1111 seeds image k of 4294967295 with 4294967296, so its infotexts
    carry such seeds, and they must reproduce here (torch seeds generators up to 2**64 - 1).

    With a variation (subseed_strength > 0) every image keeps the seed and only the variation seed advances
    (A1111's process_images_inner: `int(seed) + (x if p.subseed_strength == 0 else 0)`): a batch explores
    variations of one image."""
    return [first_seed + (k if subseed_strength == 0 else 0) for k in range(count)]


def image_generators(seeds: list[int], source: str = "CPU"):
    """One freshly seeded generator per seed, of the RNG source's kind (`pipelines.rng_source.new_generator`)."""
    return [new_generator(seed, source) for seed in seeds]


def initial_noise(generators, shape: tuple[int, int, int], subseeds: list[int] | None = None,
                  subseed_strength: float = 0.0, resize_from: tuple[int, int] | None = None):
    """One [C, h, w] draw per generator, stacked: independent of batch size by construction.

    A1111's Extra seed options (`ImageRNG.first` with RNG source CPU): `subseeds` (one per image) and
    `subseed_strength` slerp each image's noise toward its variation seed's (strength 0 draws no variation noise
    at all); `resize_from` = (h, w) in latent cells draws the noise at that size instead and centres it in
    `shape` (`centred_noise`). Each generator draws exactly one `shape` tensor, so a sampler continues from it
    as A1111's does. The generators must be freshly seeded (as `image_generators` and `seed_of_generator` make
    them): the resized noise is the seed's first draw at the old size, taken from a copy of the generator.
    Every draw is of the generators' kind (CPU torch or NV Philox): the variation seed's too, as A1111's `randn`.
    """
    import torch

    noise_shape = shape if resize_from is None else (shape[0], *resize_from)
    images = []
    for index, generator in enumerate(generators):
        if noise_shape == shape:
            noise = randn_from(generator, shape)
        else:  # A1111's `randn(seed, noise_shape)`: the seed's first draw at the old size, the generator untouched
            noise = randn_from(copy_generator(generator), noise_shape)
        if subseeds is not None and subseed_strength != 0:
            variation_generator = new_generator(int(subseeds[index]), generator_source(generator))
            noise = slerp(subseed_strength, noise, randn_from(variation_generator, noise_shape))
        if noise_shape != shape:
            noise = centred_noise(noise, randn_from(generator, shape))
        images.append(noise)
    return torch.stack(images)


def slerp(strength: float, low, high):
    """Spherical interpolation from `low` (strength 0) to `high` (strength 1), A1111's `modules.rng.slerp`.

    For a [C, h, w] noise tensor A1111 normalises along dim 1 (the rows), so each (channel, column) vector of
    `h` values is interpolated on its own great circle. Where those vectors are nearly parallel on average
    (mean cosine > 0.9995) it falls back to `low * strength + high * (1 - strength)`: weights swapped against
    the slerp's, an upstream quirk kept because infotexts with variation seeds were made with it.
    """
    import torch

    low_unit = low / torch.norm(low, dim=1, keepdim=True)
    high_unit = high / torch.norm(high, dim=1, keepdim=True)
    cosine = (low_unit * high_unit).sum(1)
    if cosine.mean() > 0.9995:
        return low * strength + high * (1 - strength)
    omega = torch.acos(cosine)
    sine = torch.sin(omega)
    low_weight = (torch.sin((1.0 - strength) * omega) / sine).unsqueeze(1)
    high_weight = (torch.sin(strength * omega) / sine).unsqueeze(1)
    return low_weight * low + high_weight * high


def centred_noise(old, new):
    """`new` [C, H, W] with `old` [C, h, w] pasted in its centre, cropped centrally where `old` is larger.

    A1111's seed resize: the old size's noise keeps its place relative to the centre, so a composition found at
    one size survives a change of aspect; the border keeps the new size's own noise. The offsets floor as A1111's
    (`(new - old) // 2`, and a larger old size loses one more cell on its far side when the difference is odd).
    """
    dx = (new.shape[2] - old.shape[2]) // 2
    dy = (new.shape[1] - old.shape[1]) // 2
    width = old.shape[2] if dx >= 0 else old.shape[2] + 2 * dx
    height = old.shape[1] if dy >= 0 else old.shape[1] + 2 * dy
    to_x, to_y = max(dx, 0), max(dy, 0)
    from_x, from_y = max(-dx, 0), max(-dy, 0)
    result = new.clone()
    result[:, to_y:to_y + height, to_x:to_x + width] = old[:, from_y:from_y + height, from_x:from_x + width]
    return result


def generator_seeds(generator, total: int, subseed_strength: float = 0.0) -> tuple[list[int], list]:
    """(seed, generator) per image for a caller's `generator=`: a CPU torch.Generator, or a list/tuple of one per image.

    A1111 has no generator argument: image k uses seed + k with a generator of its own (modules/processing.py,
    process_images_inner: `p.all_seeds = [int(seed) + x ...]`, one noise generator per seed), which is what makes
    each image's recorded seed reproduce it alone. diffusers draws a whole batch from one shared generator, whose
    later images no seed describes. So a single generator stands for its seed, A1111's way: image 0 uses it and
    image k a generator of its own seeded seed + k (seed itself with a variation: `image_seeds`), and `seeds`
    (the infotexts' `Seed`) reproduce every image.
    A generator that already drew numbers is no longer described by `initial_seed()`; its seed is then drawn
    from it (`seed_of_generator`), so the call still follows its state and records an honest seed.
    """
    generators = check_generators(generator, total)
    if len(generators) == 1 and total > 1:
        first_seed, first = seed_of_generator(generators[0])
        seeds = image_seeds(first_seed, total, subseed_strength)
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


def seed_extras_infotext(params, image_index: int) -> dict[str, object]:
    """The Extra seed keys of image `image_index` of a call, written exactly when A1111's create_infotext does:
    the variation seed and strength when the strength is not 0, "Seed resize from" when both sides are set."""
    values: dict[str, object] = {}
    if params.subseed_strength != 0:
        values["Variation seed"] = params.subseed + image_index
        values["Variation seed strength"] = params.subseed_strength
    if params.seed_resize_from_w > 0 and params.seed_resize_from_h > 0:
        values["Seed resize from"] = f"{params.seed_resize_from_w}x{params.seed_resize_from_h}"
    return values
