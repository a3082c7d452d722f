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


def test_tiny_clip_zero_shot_background_and_colour():
    from mixkit.models.vlm import load_vlm

    clip = load_vlm("mixkit-tiny-clip")
    samples = _singles(24)
    right = 0
    for image, sample in samples:
        obj = sample.scene.objects[0]
        truth = f"a {obj.colour} {obj.shape} on a {sample.scene.background} background"
        swapped = f"a {sample.scene.background} {obj.shape} on a {obj.colour} background"
        scores = clip.classify([image], [truth, swapped])[0]
        right += scores[truth] > scores[swapped]
    assert right / len(samples) >= 0.9


def test_tiny_blip2_captions_parse_and_name_the_colours():
    from mixkit.evaluation import score_captions
    from mixkit.models.vlm import load_vlm

    vlm = load_vlm("mixkit-tiny-blip2")
    samples = _singles(24)
    captions = vlm.caption([image for image, _ in samples])
    assert captions == [vlm.caption([image])[0] for image, _ in samples[:3]] + captions[3:]  # batch == singles
    scores = score_captions(captions, [s.scene for _, s in samples])
    assert scores["parsed"] >= 0.9 and scores["colour"] >= 0.7 and scores["background"] >= 0.6
    answers = vlm.answer([samples[0][0]] * 2, ["what colour is the background?", "how many shapes are there?"])
    assert answers[1] == "one"
