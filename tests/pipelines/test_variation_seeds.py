"""A1111's Extra seed options: variation seed / strength and "Resize seed from" (pipelines.seeds.initial_noise).

The oracle restates A1111 1.10 (modules/rng.py `ImageRNG.first` and `slerp` with RNG source CPU;
modules/processing.py for the seeds of a batch) with the global torch RNG, as A1111 draws:
`randn(seed, shape)` is `torch.manual_seed(seed); torch.randn(shape)`.
"""

import numpy as np
import pytest
import torch

from pipelines.infotext import parse_infotext
from pipelines.seeds import image_generators, initial_noise, slerp

SMALL = dict(width=64, height=64, steps=3, sampler="Euler a")


def a1111_randn(seed, shape):
    torch.manual_seed(seed)
    return torch.randn(shape)


def a1111_slerp(val, low, high):
    low_norm = low / torch.norm(low, dim=1, keepdim=True)
    high_norm = high / torch.norm(high, dim=1, keepdim=True)
    dot = (low_norm * high_norm).sum(1)
    if dot.mean() > 0.9995:
        return low * val + high * (1 - val)
    omega = torch.acos(dot)
    so = torch.sin(omega)
    return (torch.sin((1.0 - val) * omega) / so).unsqueeze(1) * low + (torch.sin(val * omega) / so).unsqueeze(1) * high


def a1111_first_noise(shape, seeds, subseeds, strength, resize_hw):
    """A1111's ImageRNG.first for the CPU source; returns (noise, each image's generator after it)."""
    generators = [torch.Generator("cpu").manual_seed(seed) for seed in seeds]
    noise_shape = shape if resize_hw is None else (shape[0], *resize_hw)
    xs = []
    for i, (seed, generator) in enumerate(zip(seeds, generators)):
        subnoise = a1111_randn(subseeds[i], noise_shape) if strength != 0 else None
        if noise_shape != shape:
            noise = a1111_randn(seed, noise_shape)
        else:
            noise = torch.randn(shape, generator=generator)
        if subnoise is not None:
            noise = a1111_slerp(strength, noise, subnoise)
        if noise_shape != shape:
            x = torch.randn(shape, generator=generator)
            dx = (shape[2] - noise_shape[2]) // 2
            dy = (shape[1] - noise_shape[1]) // 2
            w = noise_shape[2] if dx >= 0 else noise_shape[2] + 2 * dx
            h = noise_shape[1] if dy >= 0 else noise_shape[1] + 2 * dy
            tx, ty = (0 if dx < 0 else dx), (0 if dy < 0 else dy)
            dx, dy = max(-dx, 0), max(-dy, 0)
            x[:, ty:ty + h, tx:tx + w] = noise[:, dy:dy + h, dx:dx + w]
            noise = x
        xs.append(noise)
    return torch.stack(xs), generators


@pytest.mark.parametrize("strength, resize_hw", [
    (0.3, None),
    (0.05, None),
    (0.7, (6, 15)),  # old noise shorter and wider (odd difference): pasted in the middle rows, cropped columns
    (0.0, (11, 9)),  # resize alone: no variation draw
    (1.0, (10, 12)),  # old size larger on both sides
])
def test_initial_noise_is_a1111s_imagerng_first_exactly(strength, resize_hw):
    shape, seeds, subseeds = (4, 8, 12), [1234, 99], [77, 78]
    expected, a1111_generators = a1111_first_noise(shape, seeds, subseeds, strength, resize_hw)
    generators = image_generators(seeds)
    got = initial_noise(generators, shape, subseeds, strength, resize_hw)
    assert torch.equal(got, expected)
    # the generators continue where A1111's do, so an ancestral sampler's next noise matches too
    for ours, theirs in zip(generators, a1111_generators):
        assert torch.equal(torch.randn(shape, generator=ours), torch.randn(shape, generator=theirs))


def test_strength_0_draws_no_variation_noise_and_is_todays_noise(monkeypatch):
    import pipelines.seeds as seeds_module

    plain = initial_noise(image_generators([5, 6]), (4, 8, 8))
    draws = []
    real = seeds_module.randn_from
    monkeypatch.setattr(seeds_module, "randn_from",
                        lambda generator, shape: draws.append(shape) or real(generator, shape))
    got = initial_noise(image_generators([5, 6]), (4, 8, 8), subseeds=[9, 10], subseed_strength=0.0)
    assert torch.equal(got, plain) and draws == [(4, 8, 8), (4, 8, 8)]
    torch.manual_seed(5)
    assert torch.equal(plain[0], torch.randn(4, 8, 8))


def test_strength_1_is_the_variation_seeds_own_noise():
    got = initial_noise(image_generators([5]), (4, 16, 16), subseeds=[42], subseed_strength=1.0)
    own = initial_noise(image_generators([42]), (4, 16, 16))
    torch.testing.assert_close(got, own, rtol=0, atol=1e-5)


def test_slerp_keeps_a1111s_swapped_weights_for_nearly_parallel_noise():
    low = torch.randn(4, 8, 8, generator=torch.Generator().manual_seed(0))
    high = low * 1.001 + 1e-4
    assert torch.equal(slerp(0.25, low, high), low * 0.25 + high * 0.75)
    other = torch.randn(4, 8, 8, generator=torch.Generator().manual_seed(1))
    assert torch.equal(slerp(0.25, low, other), a1111_slerp(0.25, low, other))


def test_a_variation_batch_keeps_the_seed_and_advances_the_subseed(sd1_pipe):
    # A1111: all_seeds = seed + (x if subseed_strength == 0 else 0), all_subseeds = subseed + x
    batch = sd1_pipe(prompt="a cube", seed=10, subseed=500, subseed_strength=0.4, batch_size=2, batch_count=2, **SMALL)
    assert batch.seeds == [10, 10, 10, 10]
    infos = [parse_infotext(text) for text in batch.infotexts]
    assert [info["Variation seed"] for info in infos] == ["500", "501", "502", "503"]
    assert {info["Variation seed strength"] for info in infos} == {"0.4"}
    for k in (1, 3):
        single = sd1_pipe(prompt="a cube", seed=10, subseed=500 + k, subseed_strength=0.4, **SMALL)
        a = np.asarray(batch.images[k]).astype(int)
        assert np.abs(a - np.asarray(single.images[0]).astype(int)).max() <= 1
    # the keys sit where A1111 writes them: after the model/VAE keys, before the sampler settings
    keys = list(parse_infotext(batch.infotexts[0], defaults=False))
    assert keys.index("Variation seed") == keys.index("Variation seed strength") - 1
    assert keys.index("Size-2") < keys.index("Variation seed") < keys.index("RNG")


def test_strength_0_is_bit_identical_and_writes_no_extra_keys(sd1_pipe):
    plain = sd1_pipe(prompt="a cube", seed=3, batch_size=2, **SMALL)
    same = sd1_pipe(prompt="a cube", seed=3, subseed=1234, subseed_strength=0.0, batch_size=2, **SMALL)
    assert same.seeds == [3, 4]
    for a, b in zip(plain.images, same.images):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    assert same.infotexts == plain.infotexts
    assert "Variation seed" not in same.infotexts[0] and "Seed resize from" not in same.infotexts[0]


def test_seed_resize_draws_at_the_old_size_in_latent_cells_and_is_written(sd1_pipe, monkeypatch):
    import pipelines.base as base

    seen = []
    real = base.initial_noise
    monkeypatch.setattr(base, "initial_noise", lambda *a: seen.append((a[1], a[3], a[4])) or real(*a))
    result = sd1_pipe(prompt="a cube", seed=3, seed_resize_from_w=48, seed_resize_from_h=80, **SMALL)
    assert seen == [((4, 8, 8), 0.0, (10, 6))]  # (h, w) = (80 // 8, 48 // 8)
    assert "Seed resize from: 48x80," in result.infotexts[0]


def test_an_a1111_infotext_with_the_extra_seed_keys_reproduces_its_image(sd1_pipe):
    from webui.api_infotext import COMMON_FIELDS

    made = sd1_pipe(prompt="a cube", seed=21, subseed=8, subseed_strength=0.35, seed_resize_from_w=80,
                    seed_resize_from_h=48, **SMALL)
    parsed = parse_infotext(made.infotexts[0])
    assert parsed["Seed resize from-1"] == "80" and parsed["Seed resize from-2"] == "48"
    fields = {name: convert(parsed[key]) for name, (key, convert) in COMMON_FIELDS.items()
              if name in ("seed", "subseed", "subseed_strength", "seed_resize_from_w", "seed_resize_from_h")}
    assert fields == {"seed": 21, "subseed": 8, "subseed_strength": 0.35, "seed_resize_from_w": 80,
                      "seed_resize_from_h": 48}
    again = sd1_pipe(prompt="a cube", **fields, **SMALL)
    assert np.array_equal(np.asarray(again.images[0]), np.asarray(made.images[0]))
    assert again.infotexts == made.infotexts


def test_the_hires_pass_draws_its_noise_with_the_same_seeds_and_subseeds(sd1_pipe, monkeypatch):
    # A1111's sample_hr_pass: ImageRNG(samples.shape[1:], self.seeds, subseeds=self.subseeds, ...) again
    import pipelines.base as base
    from pipelines.hires import HiresFix

    seen = []
    real = base.initial_noise
    monkeypatch.setattr(base, "initial_noise", lambda *a: seen.append((a[1], list(a[2]), a[3], a[4])) or real(*a))
    result = HiresFix(sd1_pipe)(prompt="a cube", seed=7, subseed=40, subseed_strength=0.5, seed_resize_from_w=48,
                                seed_resize_from_h=48, batch_size=2, batch_count=2, hr_scale=1.5, **SMALL)
    assert result.seeds == [7, 7, 7, 7]
    assert seen == [((4, 8, 8), [40, 41], 0.5, (6, 6)), ((4, 12, 12), [40, 41], 0.5, (6, 6)),
                    ((4, 8, 8), [42, 43], 0.5, (6, 6)), ((4, 12, 12), [42, 43], 0.5, (6, 6))]
    assert [parse_infotext(text)["Variation seed"] for text in result.infotexts] == ["40", "41", "42", "43"]


def test_img2img_draws_the_variation_noise_too(sd1_pipe, monkeypatch):
    from PIL import Image

    import pipelines.base as base
    from pipelines.img2img import ImageToImage

    seen = []
    real = base.initial_noise
    monkeypatch.setattr(base, "initial_noise", lambda *a: seen.append((list(a[2]), a[3])) or real(*a))
    pipe = ImageToImage.from_pipeline(sd1_pipe)
    result = pipe(prompt="a cube", init_images=[Image.new("RGB", (64, 64), "red")], seed=4, subseed=9,
                  subseed_strength=0.25, batch_size=2, **SMALL)
    assert seen == [([9, 10], 0.25)] and result.seeds == [4, 4]
    assert "Variation seed: 10, Variation seed strength: 0.25" in result.infotexts[1]


def test_img2img_batch_count_gives_image_k_the_variation_seed_subseed_plus_k(sd1_pipe, monkeypatch):
    # A1111's process_images_inner: all_subseeds = [subseed + x for x in range(n_iter * batch_size)]
    from PIL import Image

    import pipelines.base as base
    from pipelines.img2img import ImageToImage

    seen = []
    real = base.initial_noise
    monkeypatch.setattr(base, "initial_noise", lambda *a: seen.append(list(a[2])) or real(*a))
    result = ImageToImage.from_pipeline(sd1_pipe)(
        prompt="a cube", init_images=[Image.new("RGB", (64, 64), "red")], seed=4, subseed=9, subseed_strength=0.25,
        batch_size=2, batch_count=2, **SMALL)
    assert seen == [[9, 10], [11, 12]] and result.seeds == [4, 4, 4, 4]
    assert [parse_infotext(text)["Variation seed"] for text in result.infotexts] == ["9", "10", "11", "12"]


@pytest.mark.parametrize("change, message", [
    ({"subseed_strength": 1.5}, r"subseed_strength must be a number in \[0, 1\].*got 1\.5"),
    ({"subseed_strength": -0.1}, r"subseed_strength must be a number in \[0, 1\]"),
    ({"subseed_strength": "0.3"}, r"subseed_strength must be a number in \[0, 1\].*got '0\.3'"),
    ({"subseed": -2}, r"subseed must be in \[-1, "),
    ({"seed_resize_from_w": -8, "seed_resize_from_h": 64}, r"seed_resize_from_w must be 0 \(off\) or a size .*got -8"),
    ({"seed_resize_from_w": 60, "seed_resize_from_h": 64}, r"'Resize seed from' 60x64 .*multiple of 8"),
    ({"seed_resize_from_w": 64, "seed_resize_from_h": 99999}, r"'Resize seed from' 64x99999 .*height must be in"),
])
def test_bad_extra_seed_values_are_refused_before_any_work(sd1_pipe, change, message):
    with pytest.raises(ValueError, match=message):
        sd1_pipe(prompt="a cube", seed=1, **{**SMALL, **change})


@pytest.mark.parametrize("width, height, named", [(64, 0, "height"), (0, 48, "width")])
def test_a_resize_with_one_side_0_is_off_as_in_a1111_and_says_so(sd1_pipe, width, height, named):
    # A1111's ImageRNG.first draws at the resize size only when both sides are > 0; with one at 0 (its sliders'
    # default) the noise, the image and the infotext are the plain seed's
    plain = sd1_pipe(prompt="a cube", seed=3, **SMALL)
    with pytest.warns(UserWarning, match=rf"'Resize seed from' {width}x{height} has its {named} at 0, so the seed is "
                                         r"not resized .*set both sides to resize it"):
        one_side = sd1_pipe(prompt="a cube", seed=3, seed_resize_from_w=width, seed_resize_from_h=height, **SMALL)
    assert one_side.images[0].tobytes() == plain.images[0].tobytes()
    assert one_side.infotexts == plain.infotexts and "Seed resize from" not in one_side.infotexts[0]
    resized = sd1_pipe(prompt="a cube", seed=3, seed_resize_from_w=48, seed_resize_from_h=48, **SMALL)
    assert resized.images[0].tobytes() != plain.images[0].tobytes()  # a resize that is on changes the image


def test_a_random_variation_seed_is_made_concrete_and_reported(sd1_pipe):
    result = sd1_pipe(prompt="a cube", seed=1, subseed_strength=0.3, batch_size=2, **SMALL)
    assert isinstance(result.subseed, int) and 0 <= result.subseed < 2**32
    assert [parse_infotext(text)["Variation seed"] for text in result.infotexts] == [
        str(result.subseed), str(result.subseed + 1)]
