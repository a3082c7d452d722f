"""AppFlow's SD tasks (appflow/tasks/diffusion.py): A1111's Extra seed options pass through, are checked before the
model loads, and are recorded in the infotexts the apps return."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from appflow import Appflow, ModelCache
from pipelines.infotext import parse_infotext

FAST = dict(steps=2, seed=7, width=32, height=32)
VARIATION = dict(subseed=500, subseed_strength=0.4)


@pytest.fixture(scope="module")
def by_hand(tiny_sd1_dir):
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained(tiny_sd1_dir)


def pixels(image):
    return np.asarray(image.convert("RGB"))


def test_text2image_takes_a1111s_variation_seed_and_records_it(tiny_sd1_dir, shared_cache, by_hand):
    flow = Appflow("text2image_generation", models=[tiny_sd1_dir], cache=shared_cache, **FAST)
    result = flow(prompt="a cat", batch_size=2, **VARIATION)
    expected = by_hand(prompt="a cat", batch_size=2, **FAST, **VARIATION)
    for made, wanted in zip(result["images"], expected.images):
        assert np.array_equal(pixels(made), pixels(wanted))
    infos = [parse_infotext(text) for text in result["infotexts"]]
    # A1111: every image keeps the seed, image k takes subseed + k
    assert [(info["Seed"], info["Variation seed"]) for info in infos] == [("7", "500"), ("7", "501")]
    assert {info["Variation seed strength"] for info in infos} == {"0.4"}
    plain = flow(prompt="a cat")
    assert not np.array_equal(pixels(plain["image"]), pixels(result["image"]))
    assert "Variation seed" not in parse_infotext(plain["infotexts"][0])


def test_text2image_batch_count_advances_the_variation_seed_per_image(tiny_sd1_dir, shared_cache):
    flow = Appflow("text2image_generation", models=[tiny_sd1_dir], cache=shared_cache, **FAST)
    result = flow(prompt="a cat", batch_count=3, **VARIATION)
    assert [parse_infotext(text)["Variation seed"] for text in result["infotexts"]] == ["500", "501", "502"]


def test_text2image_seed_resize_is_recorded(tiny_sd1_dir, shared_cache, by_hand):
    flow = Appflow("text2image_generation", models=[tiny_sd1_dir], cache=shared_cache, **FAST)
    result = flow(prompt="a cat", seed_resize_from_w=48, seed_resize_from_h=24)
    assert "Seed resize from: 48x24," in result["infotexts"][0]
    expected = by_hand(prompt="a cat", seed_resize_from_w=48, seed_resize_from_h=24, **FAST)
    assert np.array_equal(pixels(result["image"]), pixels(expected.images[0]))


def test_image2image_takes_the_variation_seed_and_records_it(tiny_sd1_dir, shared_cache, by_hand):
    from pipelines.img2img import ImageToImage

    photo = Image.new("RGB", (32, 32), (200, 120, 40))
    flow = Appflow("image2image_text_guided_generation", models=[tiny_sd1_dir], cache=shared_cache,
                   steps=2, seed=7)
    result = flow(image=photo, prompt="a cat", **VARIATION)
    expected = ImageToImage.from_pipeline(by_hand)(prompt="a cat", init_images=[photo], width=32, height=32,
                                                   denoising_strength=0.75, steps=2, seed=7, **VARIATION)
    assert np.array_equal(pixels(result["image"]), pixels(expected.images[0]))
    info = parse_infotext(result["infotexts"][0])
    assert (info["Variation seed"], info["Variation seed strength"]) == ("500", "0.4")


@pytest.mark.parametrize("option, message", [
    (dict(subseed_strength=1.5), r"subseed_strength must be a number in \[0, 1\]"),
    (dict(subseed=-2), "subseed"),
    (dict(seed_resize_from_w=-8), r"seed_resize_from_w must be 0 \(off\) or a size in pixels, got -8"),
])
@pytest.mark.parametrize("app", ["text2image_generation", "image2image_text_guided_generation"])
def test_bad_extra_seed_options_are_refused_before_the_model_loads(app, option, message):
    cache = ModelCache()
    with pytest.raises(ValueError, match=message):
        Appflow(app, cache=cache, **option)
    assert cache.loads == 0


def test_text2image_returns_the_seed_drawn_for_seed_minus_one(tiny_sd1_dir, shared_cache, by_hand):
    """With seed -1 the seed is drawn inside the call; `seeds` gives it back (image k: seed + k, as the pipelines'
    `GenerationResult.seeds`), so the image is made again from it."""
    flow = Appflow("text2image_generation", models=[tiny_sd1_dir], cache=shared_cache, steps=2, width=32, height=32)
    result = flow(prompt="a cat", seed=-1, batch_size=2)
    first = result["seeds"][0]
    assert isinstance(first, int) and 0 <= first and result["seeds"] == [first, first + 1]
    assert [parse_infotext(text)["Seed"] for text in result["infotexts"]] == [str(first), str(first + 1)]
    again = by_hand(prompt="a cat", steps=2, width=32, height=32, seed=first, batch_size=2)
    for made, wanted in zip(result["images"], again.images):
        assert np.array_equal(pixels(made), pixels(wanted))


def test_image2image_and_inpaint_return_their_seed_and_infotext(tiny_sd1_dir, shared_cache):
    photo = Image.new("RGB", (32, 32), (200, 120, 40))
    img2img = Appflow("image2image_text_guided_generation", models=[tiny_sd1_dir], cache=shared_cache, steps=2)
    made = img2img(image=photo, prompt="a cat", seed=-1)
    assert len(made["seeds"]) == 1 and parse_infotext(made["infotexts"][0])["Seed"] == str(made["seeds"][0])
    again = img2img(image=photo, prompt="a cat", seed=made["seeds"][0])
    assert np.array_equal(pixels(again["image"]), pixels(made["image"]))

    mask = Image.new("L", (32, 32), 0)
    mask.paste(255, (8, 8, 24, 24))
    inpaint = Appflow("mask_guided_inpainting", models=[tiny_sd1_dir], cache=shared_cache, steps=2)
    painted = inpaint(image=photo, mask=mask, inpaint_prompt="a dog", seed=-1)
    assert len(painted["seeds"]) == 1 and parse_infotext(painted["infotexts"][0])["Seed"] == str(painted["seeds"][0])
    untouched = inpaint(image=photo, mask=Image.new("L", (32, 32), 0), inpaint_prompt="a dog")
    assert (untouched["seeds"], untouched["infotexts"]) == ([], [])  # nothing generated, nothing to record
