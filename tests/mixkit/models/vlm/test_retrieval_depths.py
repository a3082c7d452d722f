"""`retrieve(k)` ranks each direction over its own candidates (appflow hunt finding 1).

Reference: open_clip's and LAVIS's retrieval evaluation take `logits.topk(k)` separately for
image->text (bounded by the number of texts) and text->image (bounded by the number of images);
one query image against a caption bank is the main use and must give more than one caption.
"""

from __future__ import annotations

import pytest
import torch

from mixkit.models.vlm import load_vlm
from mixkit.models.vlm.family import retrieval_depths

TEXTS = [f"a {c} {s}" for c in ("red", "green", "yellow") for s in ("circle", "square", "star")]


@pytest.fixture(scope="module")
def clip(tiny_clip_dir):
    return load_vlm(tiny_clip_dir)


def _logits(clip, images, texts):
    return clip.model.logit_scale.exp() * clip.embed_images(images) @ clip.embed_texts(texts).T


def test_one_image_against_a_caption_bank_gets_its_top_5_captions(clip, photos):
    result = clip.retrieve(photos[:1], TEXTS, k=5)  # refused before: k was capped at min(1 image, 9 texts)
    logits = _logits(clip, photos[:1], TEXTS)
    assert torch.equal(result.text_indices, logits.topk(5, dim=1).indices)
    assert result.text_indices.shape == (1, 5)
    # the other direction has a single candidate: each text's only image, ranked
    assert torch.equal(result.image_indices, torch.zeros(9, 1, dtype=torch.long))


def test_one_text_against_a_gallery_gets_its_top_3_images(clip, photos):
    result = clip.retrieve(photos, ["a red circle"], k=3)
    logits = _logits(clip, photos, ["a red circle"])
    assert torch.equal(result.image_indices, logits.T.topk(3, dim=1).indices)
    assert result.image_indices.shape == (1, 3) and result.text_indices.shape == (4, 1)


def test_a_pair_sets_each_direction_exactly(clip, photos):
    result = clip.retrieve(photos[:3], TEXTS, k=(4, 2))
    logits = _logits(clip, photos[:3], TEXTS)
    assert torch.equal(result.text_indices, logits.topk(4, dim=1).indices)
    assert torch.equal(result.image_indices, logits.T.topk(2, dim=1).indices)


@pytest.mark.parametrize("k, images, texts, depths", [(5, 1, 9, (5, 1)), (5, 9, 1, (1, 5)), (2, 3, 4, (2, 2)),
                                                      ((9, 1), 1, 9, (9, 1))])
def test_depths_per_direction(k, images, texts, depths):
    assert retrieval_depths(k, images, texts) == depths


@pytest.mark.parametrize("k, message", [
    (10, r"k=10 is above both the 1 images and the 9 texts; pass k <= 9"),
    ((2, 2), r"k=\(2, 2\) asks for 2 texts per image and 2 images per text, but there are 9 texts and 1 images"),
    (0, "k must be a positive int"), (True, "k must be a positive int"), ((1,), "k must be a positive int"),
    (2.0, "k must be a positive int"),
])
def test_impossible_depths_are_refused_saying_the_counts(k, message):
    with pytest.raises(ValueError, match=message):
        retrieval_depths(k, 1, 9)
