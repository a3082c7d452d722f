"""BLIP-2 stage-1 losses (ITC, ITM, ITG) against hand-computed values on tiny batches."""

from __future__ import annotations

import math

import pytest
import torch

from mixkit.training.losses import (
    blip2_itc_loss,
    blip2_itg_loss,
    blip2_itm_loss,
    blip2_query_text_similarity,
    multimodal_causal_mask,
    sample_itm_hard_negatives,
)


def smoothed_ce(logits: list[float], target: int, eps: float) -> float:
    """Cross-entropy against (1 - eps) on the target plus eps spread uniformly, by hand."""
    log_z = math.log(sum(math.exp(v) for v in logits))
    log_p = [v - log_z for v in logits]
    k = len(logits)
    return -sum(((1 - eps) * (i == target) + eps / k) * lp for i, lp in enumerate(log_p))


QUERIES = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.6, 0.8], [-1.0, 0.0]]])
TEXTS = torch.tensor([[1.0, 0.0], [0.0, 1.0]])


def test_similarity_is_max_over_queries():
    sim = blip2_query_text_similarity(QUERIES * 3.0, TEXTS)
    assert torch.allclose(sim, torch.tensor([[1.0, 1.0], [0.6, 0.8]]))


def test_itc_matches_hand_computation_with_label_smoothing():
    loss, logits = blip2_itc_loss(QUERIES, TEXTS, 0.5)
    i2t = [[2.0, 2.0], [1.2, 1.6]]
    t2i = [[2.0, 1.2], [2.0, 1.6]]
    expected = (
        (smoothed_ce(i2t[0], 0, 0.1) + smoothed_ce(i2t[1], 1, 0.1)) / 2
        + (smoothed_ce(t2i[0], 0, 0.1) + smoothed_ce(t2i[1], 1, 0.1)) / 2
    ) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert torch.allclose(logits, torch.tensor(i2t))


def test_itc_gradient_reaches_trainable_query_projection_not_frozen_vision():
    torch.manual_seed(0)
    frozen_vision = torch.nn.Linear(4, 4).requires_grad_(False)
    query_projection = torch.nn.Linear(4, 2)
    temperature = torch.nn.Parameter(torch.tensor(0.07))
    queries = query_projection(frozen_vision(torch.randn(3, 5, 4)))
    loss, _ = blip2_itc_loss(queries, torch.randn(3, 2), temperature)
    loss.backward()
    assert frozen_vision.weight.grad is None
    assert query_projection.weight.grad.abs().sum() > 0 and temperature.grad.abs() > 0


def test_itc_refuses_bad_temperature_and_batch_mismatch():
    with pytest.raises(ValueError, match="temperature"):
        blip2_itc_loss(QUERIES, TEXTS, 0.0)
    with pytest.raises(ValueError, match="3 texts"):
        blip2_itc_loss(QUERIES, torch.ones(3, 2), 0.1)


def test_hard_negatives_never_pick_the_positive_and_follow_the_softmax():
    generator = torch.Generator().manual_seed(0)
    sim = torch.tensor([[0.0, 8.0, -8.0], [0.0, 0.0, 0.0], [1.0, 1.0, 9.0]])
    text_picks, image_picks = [], []
    for _ in range(100):
        neg_text, neg_image = sample_itm_hard_negatives(sim, generator=generator)
        text_picks.append(neg_text)
        image_picks.append(neg_image)
    text_picks, image_picks = torch.stack(text_picks), torch.stack(image_picks)
    assert not (text_picks == torch.arange(3)).any() and not (image_picks == torch.arange(3)).any()
    # Image 0's texts: softmax weight of text 1 is e^16 times that of text 2.
    assert (text_picks[:, 0] == 1).all()
    # Image 1 has equal similarities: texts 0 and 2 are drawn about equally often.
    assert 25 < (text_picks[:, 1] == 0).sum() < 75
    # Text 0's images: column 0 is [0, 0, 1], so image 2 is e times likelier than image 1.
    share = (image_picks[:, 0] == 2).float().mean().item()
    assert share == pytest.approx(math.e / (1 + math.e), abs=0.15)


def test_itm_loss_labels_first_third_positive():
    logits = torch.tensor([[0.0, 2.0], [1.0, 0.0], [3.0, 1.0]])
    expected = (math.log1p(math.exp(-2.0)) + math.log1p(math.exp(-1.0)) + math.log1p(math.exp(-2.0))) / 3
    assert blip2_itm_loss(logits).item() == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="3 \\* batch"):
        blip2_itm_loss(torch.zeros(4, 2))


def test_multimodal_causal_mask_hides_text_from_queries():
    mask = multimodal_causal_mask(2, torch.tensor([[1, 1, 0]]))[0].int()
    expected = torch.tensor([
        [1, 1, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0],
        [1, 1, 1, 1, 0],
    ])
    assert torch.equal(mask, expected)


def test_itg_loss_is_smoothed_next_token_ce_without_padding():
    logits = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [5.0, 5.0, 5.0]]])
    input_ids = torch.tensor([[0, 1, 2]])
    full = blip2_itg_loss(logits, input_ids, torch.tensor([[1, 1, 1]]))
    expected = (smoothed_ce([2.0, 0.0, 0.0], 1, 0.1) + smoothed_ce([0.0, 1.0, 0.0], 2, 0.1)) / 2
    assert full.item() == pytest.approx(expected, rel=1e-6)
    padded = blip2_itg_loss(logits, input_ids, torch.tensor([[1, 1, 0]]))
    assert padded.item() == pytest.approx(smoothed_ce([2.0, 0.0, 0.0], 1, 0.1), rel=1e-6)
