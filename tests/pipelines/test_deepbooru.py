"""A1111's Interrogate DeepBooru from an image: its 512x512 "resize and fill" input in [0, 1], then the tag text of a
crafted tagger file whose scores are known exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from mixkit.interrogate import DeepbooruModel, DeepbooruSettings
from mixkit.testing.tiny_deepbooru import crafted_deepbooru_state, save_deepbooru
from pipelines.deepbooru import deepbooru_pixels, interrogate_deepbooru
from pipelines.image_prep import resize_image

TAGS = ["solo", "1girl", "rating:safe", "long_hair", "hat_(object)"]
LOGITS = [2.0, 3.0, 5.0, 0.5, -1.0]  # scores 0.881, 0.953, 0.993, 0.622, 0.269


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("torch_deepdanbooru")
    save_deepbooru(path / "model-resnet_custom_v3.pt", crafted_deepbooru_state(LOGITS), TAGS)
    return path


def test_pixels_are_a1111s_resize_and_fill_to_512_divided_by_255():
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 256, (100, 300, 3), dtype=np.uint8))
    pixels = deepbooru_pixels(image)
    assert pixels.shape == (1, 3, 512, 512) and pixels.dtype == torch.float32
    expected = np.asarray(resize_image(image, 512, 512, "resize and fill"), dtype=np.float32) / 255
    assert torch.equal(pixels[0].permute(1, 2, 0), torch.from_numpy(expected))


def test_alpha_is_dropped_not_composited_as_a1111_converts_to_rgb():
    image = Image.new("RGBA", (64, 64), (200, 100, 50, 0))
    assert torch.equal(deepbooru_pixels(image)[0, :, 256, 256], torch.tensor([200, 100, 50]) / 255)


def test_interrogation_gives_a1111s_text_for_the_crafted_scores(folder):
    image = Image.new("RGB", (640, 480), "white")
    assert interrogate_deepbooru(image, model=folder) == "1girl, long hair, solo"
    ranked = DeepbooruSettings(sort_alpha=False, use_spaces=False, return_ranks=True, score_threshold=0.25)
    assert interrogate_deepbooru(image, ranked, model=DeepbooruModel(folder)) == (
        "(1girl:0.953), (solo:0.881), (long_hair:0.622), (hat_\\(object\\):0.269)")


def test_bad_inputs_are_refused(folder, tmp_path):
    with pytest.raises(TypeError, match="tags a PIL image, got ndarray"):
        interrogate_deepbooru(np.zeros((8, 8, 3)), model=folder)
    with pytest.raises(TypeError, match="settings must be DeepbooruSettings"):
        interrogate_deepbooru(Image.new("RGB", (8, 8)), {"score_threshold": 0.5}, model=folder)
    with pytest.raises(FileNotFoundError, match="model-resnet_custom_v3.pt"):
        interrogate_deepbooru(Image.new("RGB", (8, 8)), model=tmp_path)
