"""Every registered family, built tiny, saved and loaded through load_vlm: its tasks run and batch == singles."""

from __future__ import annotations

import pytest
import torch

from mixkit.models.vlm import VLM_FAMILIES, load_vlm
from mixkit.testing import tiny_vlm

BUILDERS = {
    "clip": tiny_vlm.build_tiny_clip,
    "siglip": tiny_vlm.build_tiny_siglip,
    "blip2": tiny_vlm.build_tiny_blip2,
    "instructblip": tiny_vlm.build_tiny_instructblip,
    "llava": tiny_vlm.build_tiny_llava,
}


SESSION_FOLDERS = {"clip": "tiny_clip_dir", "blip2": "tiny_blip2_opt_dir",
                   "modular": "tiny_modular_blip2_dir"}  # built once in conftest


def test_every_registered_family_has_a_tiny_builder():
    assert sorted(VLM_FAMILIES.names()) == sorted(set(BUILDERS) | set(SESSION_FOLDERS))


@pytest.fixture(scope="module", params=sorted(set(BUILDERS) | set(SESSION_FOLDERS)))
def family_model(request, tmp_path_factory):
    if request.param in SESSION_FOLDERS:
        folder = request.getfixturevalue(SESSION_FOLDERS[request.param])
    else:
        folder = BUILDERS[request.param](tmp_path_factory.mktemp(f"tiny-{request.param}"), seed=0)
    model = load_vlm(folder)
    assert model.family == request.param
    return model, folder


def test_tasks_batch_equals_singles(family_model, photos):
    model, _ = family_model
    images = photos[:3]
    if "caption" in model.tasks:
        questions = ["what is it?", "two people riding bikes?", "a"]
        batch = model.answer(images, questions, max_new_tokens=4)
        assert batch == [model.answer([i], [q], max_new_tokens=4)[0] for i, q in zip(images, questions)]
        assert all(isinstance(text, str) for text in model.caption(images, max_new_tokens=3))
    else:
        templates = ["a photo of a {}.", "a drawing of a {}."]
        batch = model.classify(images, ["cat", "dog", "car"], templates=templates)
        singles = [model.classify([image], ["cat", "dog", "car"], templates=templates)[0] for image in images]
        for b, s in zip(batch, singles):
            assert b == pytest.approx(s, abs=1e-5)


def test_siglip_probabilities_are_transformers_sigmoid_logits(tmp_path, photos):
    from transformers import SiglipModel, SiglipProcessor

    folder = tiny_vlm.build_tiny_siglip(tmp_path, seed=1)
    ours = load_vlm(folder).classify(photos[:2], ["cat", "red car"], templates=["{}"])
    model, processor = SiglipModel.from_pretrained(folder).eval(), SiglipProcessor.from_pretrained(folder)
    inputs = processor(text=["cat", "red car"], images=photos[:2], padding="max_length", max_length=64,
                       return_tensors="pt")
    with torch.no_grad():
        expected = model(**inputs).logits_per_image.sigmoid()
    got = torch.tensor([list(row.values()) for row in ours])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
