"""The shipped mixkit-tiny models load by name through the public loaders and do their job on the world.

A fast quality smoke test (the full figures come from `mixkit eval tiny`): floors well below the
measured accuracy (see each model's recipe_record.json) but far above chance, so a broken export,
a wrong tokenizer or wrong image statistics fail here.
"""

from __future__ import annotations

import pytest

from mixkit.data.shapes import WorldConfig, generate_samples
from mixkit.errors import ModelNotFoundError, UnknownNameError
from mixkit.io.sources import resolve_model_source
from mixkit.tiny import SHIPPED_MODELS, shipped_model_path


def _singles(count: int, seed: int = 99):
    world = WorldConfig(two_shape_fraction=0.0, caption_mode="plain")
    return [(s.render(64, world), s) for s in generate_samples(count, seed, world)]


def test_names_resolve_to_the_shipped_folders_and_local_folders_win(tmp_path, monkeypatch):
    assert resolve_model_source("mixkit-tiny-clip") == shipped_model_path("mixkit-tiny-clip")
    (tmp_path / "mixkit-tiny-clip").mkdir()
    monkeypatch.chdir(tmp_path)
    assert resolve_model_source("mixkit-tiny-clip").resolve() == (tmp_path / "mixkit-tiny-clip").resolve()
    with pytest.raises(UnknownNameError, match="mixkit-tiny-blip2"):
        SHIPPED_MODELS.get("mixkit-tiny-xl")


def test_a_missing_shipped_folder_says_how_to_rebuild_it(monkeypatch, tmp_path):
    import mixkit.tiny.shipped as shipped

    monkeypatch.setattr(shipped, "WEIGHTS_DIR", tmp_path)
    with pytest.raises(ModelNotFoundError, match="mixkit train recipe tiny-clip"):
        shipped.shipped_model_path("mixkit-tiny-clip")


def _zero_shot_accuracy(options_for) -> float:
    """Share of 24 renders where tiny-clip ranks the right one of `options_for(scene)`'s captions first;
    `options_for` returns (right key, {key: caption})."""
    from mixkit.models.vlm import load_vlm

    clip = load_vlm("mixkit-tiny-clip")
    samples = _singles(24)
    right = 0
    for image, sample in samples:
        truth, options = options_for(sample.scene)
        scores = clip.classify([image], list(options.values()))[0]
        right += max(options, key=lambda key: scores[options[key]]) == truth
    return right / len(samples)


def test_tiny_clip_zero_shot_background_and_colour():
    def swapped_colours(scene):
        obj = scene.objects[0]
        return "truth", {"truth": f"a {obj.colour} {obj.shape} on a {scene.background} background",
                         "swapped": f"a {scene.background} {obj.shape} on a {obj.colour} background"}

    assert _zero_shot_accuracy(swapped_colours) >= 0.9


def test_tiny_clip_zero_shot_shape_among_the_five():
    # Measured on the shipped weights with these 24 images: 24/24 (v1, trained without shape variants: 39%
    # over 200). Chance is 1/5.
    def other_shapes(scene):
        obj = scene.objects[0]
        return obj.shape, {shape: f"a {obj.colour} {shape} on a {scene.background} background"
                           for shape in WorldConfig().shapes}

    assert _zero_shot_accuracy(other_shapes) >= 0.8


def test_tiny_blip2_captions_parse_and_name_colours_and_shapes():
    from mixkit.evaluation import score_captions
    from mixkit.models.vlm import load_vlm

    vlm = load_vlm("mixkit-tiny-blip2")
    samples = _singles(24)
    captions = vlm.caption([image for image, _ in samples])
    assert captions == [vlm.caption([image])[0] for image, _ in samples[:3]] + captions[3:]  # batch == singles
    scores = score_captions(captions, [s.scene for _, s in samples])
    # Measured on the shipped weights with these 24 images: parsed 100%, background 100%, colour 96%,
    # shape 96% (chance 1/6, 1/7 and 1/5).
    assert scores["parsed"] >= 0.9 and scores["background"] >= 0.8 and scores["colour"] >= 0.7
    assert scores["shape"] >= 0.75
    answers = vlm.answer([samples[0][0]] * 2, ["what colour is the background?", "how many shapes are there?"])
    assert answers[1] == "one"


def test_tiny_blip2_says_where_the_shape_is():
    """Learned image positions + position questions: before them every caption said "at the top left"."""
    from mixkit.evaluation import score_captions
    from mixkit.models.vlm import load_vlm

    world = WorldConfig(two_shape_fraction=0.0, caption_mode="rich")
    samples = [s for s in generate_samples(60, 5, world) if s.scene.objects[0].position][:24]
    vlm = load_vlm("mixkit-tiny-blip2")
    scores = score_captions(vlm.caption([s.render(64, world) for s in samples]), [s.scene for s in samples])
    # Measured on the shipped weights with these 24 images: position named 100%, right 96%; chance is 1/9.
    assert scores["position_named"] >= 0.9 and scores["position"] >= 0.7, scores
    answers = vlm.answer([samples[0].render(64, world)], [f"where is the {samples[0].scene.objects[0].shape}?"])
    assert answers == [samples[0].scene.objects[0].position]


# -- mixkit-tiny-sd: the default text-to-image model of the CLI, AppFlow and the web UI -------------------------
SD_PROMPTS = 24
# Measured on the shipped weights with these prompts and seeds (README: `mixkit eval tiny`): background
# 100%, colour 100%, shape 67%. Chance is 1/7 for colours and 1/5 for shapes.
SD_FLOORS = {"background": 0.9, "colour": 0.75, "shape": 0.4}


@pytest.fixture(scope="module")
def tiny_sd():
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained("mixkit-tiny-sd")


def test_tiny_sd_loads_by_name_as_a_stable_diffusion_model_trained_at_64_px(tiny_sd):
    from diffusers import StableDiffusionPipeline

    assert tiny_sd.model.native_size == 64 and tiny_sd.model.family.value == "sd1"
    # The folder is a plain diffusers folder: diffusers' own loader reads it too.
    pipe = StableDiffusionPipeline.from_pretrained(shipped_model_path("mixkit-tiny-sd"), safety_checker=None)
    assert pipe.unet.config.sample_size * pipe.vae_scale_factor == 64


def test_tiny_sd_draws_what_the_prompt_says(tiny_sd):
    """Quality smoke test: the judge reads shape, colour and background of generated images.

    Floors sit well below the figures of `mixkit eval tiny` (README) and far above chance (1/5 shapes,
    1/7 colours); the same seeds give the same images, so this cannot pass by luck on one run and fail
    on the next."""
    from dataclasses import replace

    from mixkit.evaluation import eval_prompts, load_shipped_judge, score_images
    from mixkit.tiny.recipe_common import base_world

    prompts = [p.prompt for p in eval_prompts(replace(base_world(), held_out=()), count=SD_PROMPTS, seed=77)]
    images = []
    for start, seed in ((0, 5), (16, 21)):  # the pipeline takes batches of at most 16
        chunk = prompts[start:start + 16]
        images += tiny_sd(prompt=chunk, batch_size=len(chunk), steps=20, cfg_scale=5.0, sampler="DPM++ 2M", seed=seed,
                          width=64, height=64).images
    scores = score_images(load_shipped_judge(), images, prompts)
    assert scores["single/background"] >= SD_FLOORS["background"], scores
    assert scores["single/colour"] >= SD_FLOORS["colour"], scores
    assert scores["single/shape"] >= SD_FLOORS["shape"], scores


def test_tiny_sd_autoencoder_draws_new_shapes_but_not_new_colours(tiny_sd):
    """The ceiling a LoRA for a new concept works under (benchmarks/tiny_lora_concept.py prints it).

    The autoencoder was trained on the base colours only: it reconstructs a heart or a diamond that
    the judge still reads, but turns orange into yellow, so a colour LoRA cannot reach 80% on it."""
    from dataclasses import replace

    from mixkit.evaluation import load_shipped_judge
    from mixkit.tiny.recipe_common import base_world
    from mixkit.tiny.recipe_vae import reconstruction_accuracy
    from mixkit.tiny.world_data import render_world

    judge, world = load_shipped_judge(), replace(base_world(), held_out=(), two_shape_fraction=0.0)
    ceiling = {}
    for concept, field in (("heart", "shapes"), ("diamond", "shapes"), ("orange", "colours")):
        renders = render_world(48, 3, replace(world, **{field: (concept,)}), 64)
        ceiling[concept] = reconstruction_accuracy(tiny_sd.model.vae, renders, judge)[f"single/{field[:-1]}"]
    assert ceiling["heart"] >= 0.9 and ceiling["diamond"] >= 0.8, ceiling
    assert ceiling["orange"] <= 0.5, ceiling


def test_generate_without_a_model_uses_the_shipped_tiny_sd_at_its_native_size(tmp_path, monkeypatch):
    from PIL import Image

    from webui.cli import main

    monkeypatch.delenv("MIXKIT_MODEL", raising=False)
    assert main(["generate", "a red circle on a blue background", "--steps", "8", "--seed", "3",
                 "-o", str(tmp_path)]) == 0
    (png,) = tmp_path.glob("*.png")
    image = Image.open(png)
    assert image.size == (64, 64) and "Model: mixkit-tiny-sd" in image.info["parameters"]


def test_appflow_text_to_image_defaults_to_the_shipped_tiny_sd():
    from appflow import Appflow

    result = Appflow("text2image_generation", steps=8, seed=3)(prompt="a green star on a white background")
    assert result["images"][0].size == (64, 64)
