"""CLIP through load_vlm: embeddings equal transformers', zero-shot ensembling by hand, batch == singles."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mixkit.models.vlm import load_vlm


@pytest.fixture(scope="module")
def clip(tiny_clip_dir):
    return load_vlm(tiny_clip_dir)


def test_embeddings_match_transformers_directly(clip, tiny_clip_dir, photos):
    from transformers import CLIPModel, CLIPProcessor

    model = CLIPModel.from_pretrained(tiny_clip_dir).eval()
    processor = CLIPProcessor.from_pretrained(tiny_clip_dir)
    inputs = processor(images=photos, text=["a cat", "two dogs here"], padding=True, return_tensors="pt")
    with torch.no_grad():
        image_ref = F.normalize(model.get_image_features(pixel_values=inputs["pixel_values"]).pooler_output, dim=-1)
        text_ref = F.normalize(
            model.get_text_features(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).pooler_output,
            dim=-1,
        )
    torch.testing.assert_close(clip.embed_images(photos), image_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(clip.embed_texts(["a cat", "two dogs here"]), text_ref, atol=1e-5, rtol=1e-5)


def test_classify_is_prompt_ensemble_softmax(clip, photos):
    templates = ["a photo of a {}.", "a drawing of a {}."]
    labels = ["cat", "dog", "red car"]
    result = clip.classify(photos[:2], labels, templates=templates)
    texts = clip.embed_texts([t.format(label) for label in labels for t in templates]).view(3, 2, -1)
    ensembled = F.normalize(texts.mean(dim=1), dim=-1)
    expected = (clip.model.logit_scale.exp() * clip.embed_images(photos[:2]) @ ensembled.T).softmax(-1)
    for row, probabilities in zip(expected, result):
        assert list(probabilities) == labels
        assert torch.allclose(torch.tensor(list(probabilities.values())), row, atol=1e-6)
        assert sum(probabilities.values()) == pytest.approx(1.0, abs=1e-6)


def test_batch_equals_singles(clip, photos):
    batch = clip.classify(photos, ["cat", "dog"])
    singles = [clip.classify([image], ["cat", "dog"])[0] for image in photos]
    for b, s in zip(batch, singles):
        assert b == pytest.approx(s, abs=1e-5)


def test_retrieve_returns_top_k_both_ways(clip, photos):
    texts = ["a cat", "a dog", "a car", "a tree"]
    result = clip.retrieve(photos[:3], texts, k=2)
    logits = clip.model.logit_scale.exp() * clip.embed_images(photos[:3]) @ clip.embed_texts(texts).T
    assert torch.equal(result.text_indices, logits.topk(2, dim=1).indices)
    assert torch.equal(result.image_indices, logits.T.topk(2, dim=1).indices)
    assert result.text_scores.shape == (3, 2) and result.image_scores.shape == (4, 2)


def test_eager_and_sdpa_agree(tiny_clip_dir, clip, photos):
    eager = load_vlm(tiny_clip_dir, attn_implementation="eager")
    sdpa = clip  # loaded with the default, "sdpa"
    torch.testing.assert_close(eager.embed_images(photos), sdpa.embed_images(photos), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(eager.embed_texts(["a b", "c"]), sdpa.embed_texts(["a b", "c"]), atol=1e-5, rtol=1e-4)


def test_bad_task_inputs_are_named(clip, photos):
    with pytest.raises(ValueError, match="labels is empty"):
        clip.classify(photos, [])
    with pytest.raises(ValueError, match="placeholder"):
        clip.classify(photos, ["cat"], templates=["no placeholder"])
    with pytest.raises(ValueError, match=r"k=4 is above both the 2 images and the 3 texts; pass k <= 3"):
        clip.retrieve(photos[:2], ["a", "b", "c"], k=4)
    with pytest.raises(ValueError, match="cannot caption.*'blip2'"):
        clip.caption(photos)


def test_bad_image_files_fail_before_the_model_runs(clip, tmp_path, photos):
    from mixkit.io.images import InvalidImageError

    notes = tmp_path / "notes.png"
    notes.write_text("not pixels")
    with pytest.raises(InvalidImageError, match="notes.png"):
        clip.classify([photos[0], notes], ["cat"])
