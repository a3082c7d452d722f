"""`generator=`: every image records a seed that reproduces it, A1111's way (image k: seed + k, its own generator).

A1111 (modules/processing.py, process_images_inner) seeds image k of a generation with `int(seed) + k`, each with a
noise generator of its own; it has no generator argument. diffusers draws a whole batch from one generator, so
its images 2..n have no seed at all. mixkit's single generator stands for its seed (`generator_seeds`).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipelines.seeds import generator_seeds

SMALL = dict(steps=4, width=64, height=64, sampler="Euler a")


def pixels(image):
    return np.asarray(image, dtype=np.int16)


def test_shared_generator_records_seed_plus_k_and_each_seed_remakes_its_image(sd1_pipe):
    """Was: seeds [5, 5, 5], and image 1 was neither seed 5's nor seed 6's image."""
    shared = sd1_pipe(prompt="a red circle", batch_size=3, generator=torch.Generator().manual_seed(5), **SMALL)
    assert shared.seeds == [5, 6, 7]
    assert ["Seed: 5," in t for t in shared.infotexts] == [True, False, False] and "Seed: 6," in shared.infotexts[1]
    by_seed = sd1_pipe(prompt="a red circle", batch_size=3, seed=5, **SMALL)
    for a, b in zip(shared.images, by_seed.images):
        assert np.array_equal(pixels(a), pixels(b))
    alone = sd1_pipe(prompt="a red circle", seed=6, **SMALL).images[0]  # a batch of 1: the README's rounding bound
    assert np.abs(pixels(alone) - pixels(shared.images[1])).max() <= 1


def test_used_generator_records_a_seed_drawn_from_it_that_remakes_the_images(sd1_pipe):
    """Was: `initial_seed()` recorded, although the generator had moved on and the image was not that seed's."""
    generator = torch.Generator().manual_seed(5)
    torch.randn(3, generator=generator)
    expected_seed = int(torch.randint(0, 2**32, (1,), generator=_after_randn(5)))
    result = sd1_pipe(prompt="a red circle", batch_size=2, generator=generator, **SMALL)
    assert result.seeds == [expected_seed, expected_seed + 1]
    again = sd1_pipe(prompt="a red circle", batch_size=2, seed=expected_seed, **SMALL)
    for a, b in zip(result.images, again.images):
        assert np.array_equal(pixels(a), pixels(b))


def _after_randn(seed: int) -> torch.Generator:
    generator = torch.Generator().manual_seed(seed)
    torch.randn(3, generator=generator)
    return generator


def test_generators_per_image_keep_their_seeds_and_a_tuple_is_accepted():
    gens = (torch.Generator().manual_seed(3), torch.Generator().manual_seed(9))
    seeds, generators = generator_seeds(gens, 2)
    assert seeds == [3, 9] and generators == list(gens)


def test_seed_and_generator_together_are_refused(sd1_pipe):
    with pytest.raises(ValueError, match=r"seed=5 and generator= were both given"):
        sd1_pipe(prompt="x", seed=5, generator=torch.Generator().manual_seed(5), **SMALL)


@pytest.mark.parametrize("bad, message", [
    (42, r"generator= must be a CPU torch\.Generator, or a list of one per image, got int: 42"),
    ([torch.Generator(), None], r"generator\[1\] must be a torch\.Generator .*got NoneType"),
    ("g", r"generator= must be .*got str"),
])
def test_bad_generators_are_type_errors_naming_the_argument(sd1_pipe, bad, message):
    """Was: AttributeError: 'int' object has no attribute 'initial_seed', from inside the pipeline."""
    with pytest.raises(TypeError, match=message):
        sd1_pipe(prompt="x", batch_size=2, generator=bad, **SMALL)


def test_the_same_generator_twice_is_refused(sd1_pipe):
    generator = torch.Generator().manual_seed(1)
    with pytest.raises(ValueError, match=r"lists the same generator more than once"):
        sd1_pipe(prompt="x", batch_size=2, generator=[generator, generator], **SMALL)
    with pytest.raises(ValueError, match=r"Got 3 generators for 2 images"):
        sd1_pipe(prompt="x", batch_size=2, generator=[generator] * 3, **SMALL)


def test_a_seed_no_infotext_can_carry_is_replaced_by_one_drawn_from_the_generator():
    """torch's `Generator.seed()` picks 64-bit seeds; an infotext seed above 2**53 - 1 could not be typed back."""
    huge = torch.Generator().manual_seed(2**63 + 5)
    expected = int(torch.randint(0, 2**32, (1,), generator=torch.Generator().manual_seed(2**63 + 5)))
    seeds, generators = generator_seeds(huge, 2)
    assert seeds == [expected, expected + 1]
    assert torch.equal(torch.randn(4, generator=generators[0]), torch.randn(4, generator=torch.Generator().manual_seed(expected)))
