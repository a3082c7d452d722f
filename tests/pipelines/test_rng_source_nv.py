"""A1111's RNG source NV in the pipelines: every draw of an image's noise from a Philox generator of its seed.

The oracle restates A1111 1.10's modules/rng.py with the NV source: `ImageRNG` makes one `rng_philox.Generator(seed)`
per image; `first()` is its draw 0, the variation seed's noise a fresh generator of the subseed, and ENSD replaces
the generators with ones of seed + ENSD afterwards; k-diffusion's `randn_like` (the ancestral samplers' step noise)
is `ImageRNG.next()`, the next draw of each image's generator.
"""

import numpy as np
import pytest
import torch

from mixkit.random import PhiloxGenerator
from pipelines.infotext import parse_infotext
from pipelines.seeds import image_generators, initial_noise, slerp

SMALL = dict(width=64, height=64, steps=3)
SHAPE = (4, 8, 8)


def pixels(image):
    return np.asarray(image).astype(np.int16)


@pytest.fixture
def philox_draws(monkeypatch):
    """(seed, offset, shape) of every Philox draw made, in order."""
    draws = []
    original = PhiloxGenerator.randn

    def recording(self, shape):
        draws.append((self.seed, self.offset, tuple(shape)))
        return original(self, shape)

    monkeypatch.setattr(PhiloxGenerator, "randn", recording)
    return draws


def test_nv_generators_are_philox_generators_of_the_seeds():
    generators = image_generators([5, 6], "NV")
    assert [(type(g), g.seed, g.offset) for g in generators] == [(PhiloxGenerator, 5, 0), (PhiloxGenerator, 6, 0)]
    noise = initial_noise(generators, SHAPE)
    assert torch.equal(noise[1], PhiloxGenerator(6).randn(SHAPE))
    assert [g.offset for g in generators] == [1, 1]  # one draw each, as A1111's first()


def test_nv_variation_seed_and_resize_follow_a1111s_image_rng():
    generators = image_generators([5], "NV")
    noise = initial_noise(generators, SHAPE, subseeds=[77], subseed_strength=0.3, resize_from=(6, 10))
    old = slerp(0.3, PhiloxGenerator(5).randn((4, 6, 10)), PhiloxGenerator(77).randn((4, 6, 10)))
    # the old size's noise is the seed's draw 0, and the full-size background the generator's own draw 0 too
    expected = PhiloxGenerator(5).randn(SHAPE)
    expected[:, 1:7, 0:8] = old[:, :, 1:9]
    assert torch.equal(noise[0], expected)
    assert generators[0].offset == 1


def test_same_seed_gives_the_same_nv_image_bit_for_bit_and_it_differs_from_cpu(sd1_pipe):
    first = sd1_pipe(prompt="a red circle", seed=21, sampler="Euler a", rng_source="NV", **SMALL)
    second = sd1_pipe(prompt="a red circle", seed=21, sampler="Euler a", rng_source="NV", **SMALL)
    cpu = sd1_pipe(prompt="a red circle", seed=21, sampler="Euler a", **SMALL)
    assert np.array_equal(pixels(first.images[0]), pixels(second.images[0]))
    assert not np.array_equal(pixels(first.images[0]), pixels(cpu.images[0]))
    assert parse_infotext(first.infotexts[0])["RNG"] == "NV"
    assert parse_infotext(cpu.infotexts[0])["RNG"] == "CPU"


def test_nv_image_equals_diffusers_run_on_the_nv_noise_as_latents(sd1_pipe, tiny_sd1_dir):
    """Oracle: diffusers' StableDiffusionPipeline, handed the Philox draw as its latents (Euler adds no noise)."""
    from diffusers import StableDiffusionPipeline

    from pipelines.samplers import make_scheduler

    ours = sd1_pipe(prompt="a red circle", negative_prompt="ugly", seed=7, sampler="Euler", cfg_scale=5.0,
                    rng_source="NV", steps=4, width=64, height=64)
    reference = StableDiffusionPipeline.from_pretrained(tiny_sd1_dir, safety_checker=None,
                                                        requires_safety_checker=False)
    reference.scheduler = make_scheduler("Euler", dict(reference.scheduler.config), "Automatic")
    latents = PhiloxGenerator(7).randn((1, *SHAPE))
    theirs = reference(prompt="a red circle", negative_prompt="ugly", latents=latents, guidance_scale=5.0,
                       num_inference_steps=4, width=64, height=64, output_type="np").images[0]
    assert np.abs(pixels(ours.images[0]) - (theirs * 255).round().astype(np.int16)).max() <= 1


@pytest.mark.parametrize("sampler, calls_with_noise", [("Euler a", [1, 2, 3]), ("DPM2 a", [1, 2]),
                                                       ("DPM++ 2S a", [1, 2]), ("LCM", [1, 2])])
def test_step_noise_is_each_images_next_philox_draw(sd1_pipe, philox_draws, sampler, calls_with_noise):
    # A1111's ImageRNG.next(): image k's generator continues after its initial draw, one draw per noisy step
    # (the last step to sigma 0 adds none; DPM2 a / DPM++ 2S a add theirs after the second model call of a step).
    sd1_pipe(prompt="a", seed=40, batch_size=2, sampler=sampler, rng_source="NV", **SMALL)
    assert draws_of(philox_draws, 40) == [(40, 0)] + [(40, offset) for offset in calls_with_noise]
    assert draws_of(philox_draws, 41) == [(41, 0)] + [(41, offset) for offset in calls_with_noise]
    assert {shape for _, _, shape in philox_draws} <= {SHAPE, (1, *SHAPE)}


def draws_of(draws, seed):
    return [(s, offset) for s, offset, _ in draws if s == seed]


def test_ensd_draws_the_step_noise_from_generators_of_seed_plus_delta(sd1_pipe, philox_draws):
    result = sd1_pipe(prompt="a", seed=40, sampler="Euler a", rng_source="NV", ensd=31337, **SMALL)
    assert draws_of(philox_draws, 40) == [(40, 0)]
    assert draws_of(philox_draws, 40 + 31337) == [(40 + 31337, 0), (40 + 31337, 1), (40 + 31337, 2)]
    assert parse_infotext(result.infotexts[0])["ENSD"] == "31337"


def test_variation_seed_noise_is_nv_too(sd1_pipe, philox_draws):
    sd1_pipe(prompt="a", seed=3, subseed=9, subseed_strength=0.5, sampler="Euler", rng_source="NV", **SMALL)
    assert draws_of(philox_draws, 3) == [(3, 0)] and draws_of(philox_draws, 9) == [(9, 0)]


def test_sde_samplers_keep_their_brownian_trees_with_nv(sd1_pipe, philox_draws):
    pytest.importorskip("torchsde", reason="DPM++ 2M SDE needs torchsde (the `sde` extra)")
    sd1_pipe(prompt="a", seed=3, sampler="DPM++ 2M SDE", rng_source="NV", **SMALL)
    assert draws_of(philox_draws, 3) == [(3, 0)]  # A1111: Brownian trees seeded by the image seeds, whatever the source


def test_batch_image_k_is_reproduced_by_its_seed_alone_with_nv(sd1_pipe):
    batch = sd1_pipe(prompt="a cat", seed=10, batch_size=2, sampler="Euler a", rng_source="NV", **SMALL)
    single = sd1_pipe(prompt="a cat", seed=11, sampler="Euler a", rng_source="NV", **SMALL)
    assert np.abs(pixels(batch.images[1]) - pixels(single.images[0])).max() <= 1


def test_a_callers_generator_stands_for_its_seed_with_nv(sd1_pipe):
    given = sd1_pipe(prompt="a", generator=torch.Generator().manual_seed(12), sampler="Euler a", rng_source="NV",
                     **SMALL)
    seeded = sd1_pipe(prompt="a", seed=12, sampler="Euler a", rng_source="NV", **SMALL)
    assert given.seeds == [12]
    assert np.array_equal(pixels(given.images[0]), pixels(seeded.images[0]))


def test_hires_second_pass_draws_nv_noise_from_the_image_seeds(sd1_pipe, philox_draws):
    from pipelines.hires import HiresFix, HiresParams

    hires = HiresFix(sd1_pipe)
    result = hires(HiresParams(prompt="a", seed=5, sampler="Euler", rng_source="NV", hr_scale=1.5,
                               hr_upscaler="Latent", denoising_strength=0.5, **SMALL))
    assert draws_of(philox_draws, 5) == [(5, 0), (5, 0)]  # a new ImageRNG for the second pass, as A1111's
    assert parse_infotext(result.infotexts[0])["RNG"] == "NV"


def test_img2img_noise_is_nv(sd1_pipe, picture, philox_draws):
    from pipelines.img2img import ImageToImage

    pipe = ImageToImage.from_pipeline(sd1_pipe)
    result = pipe(prompt="a", init_images=[picture], seed=8, sampler="Euler a", rng_source="NV",
                  denoising_strength=0.5, **SMALL)
    assert draws_of(philox_draws, 8)[0] == (8, 0) and len(draws_of(philox_draws, 8)) >= 2
    assert parse_infotext(result.infotexts[0])["RNG"] == "NV"


@pytest.mark.parametrize("value", ["nv", "Philox", "", None, 1])
def test_unknown_rng_sources_are_refused_listing_the_valid_ones(sd1_pipe, value):
    with pytest.raises(ValueError, match=r"rng_source must be one of 'GPU', 'CPU', 'NV'"):
        sd1_pipe(prompt="a", seed=1, rng_source=value, **SMALL)


def test_gpu_is_the_cpu_noise_on_a_cpu_model_and_recorded_as_cpu(sd1_pipe):
    gpu = sd1_pipe(prompt="a", seed=2, sampler="Euler a", rng_source="GPU", **SMALL)
    cpu = sd1_pipe(prompt="a", seed=2, sampler="Euler a", rng_source="CPU", **SMALL)
    assert np.array_equal(pixels(gpu.images[0]), pixels(cpu.images[0]))
    assert parse_infotext(gpu.infotexts[0])["RNG"] == "CPU"
