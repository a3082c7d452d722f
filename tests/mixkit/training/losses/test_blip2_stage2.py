"""BLIP-2 stage-2 LM labels and loss, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from mixkit.training.losses import build_lm_labels, causal_lm_loss


def test_labels_mask_queries_prompt_and_padding_right_padded():
    ids = torch.tensor([[5, 6, 7, 8], [5, 9, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    labels = build_lm_labels(ids, mask, num_query_tokens=2, prompt_lengths=[1, 1])
    assert labels.tolist() == [[-100, -100, -100, 6, 7, 8], [-100, -100, -100, 9, -100, -100]]


def test_labels_with_left_padding_count_prompt_from_first_real_token():
    ids = torch.tensor([[0, 0, 5, 9], [5, 6, 7, 8]])
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    labels = build_lm_labels(ids, mask, num_query_tokens=1, prompt_lengths=torch.tensor([1, 2]))
    assert labels.tolist() == [[-100, -100, -100, -100, 9], [-100, -100, -100, 7, 8]]


def test_causal_lm_loss_by_hand():
    logits = torch.zeros(1, 3, 2)
    logits[0, 1] = torch.tensor([0.0, 3.0])
    labels = torch.tensor([[-100, -100, 1]])
    # Only position 1 predicts a supervised label (label 1 at position 2).
    assert causal_lm_loss(logits, labels).item() == pytest.approx(math.log1p(math.exp(-3.0)), rel=1e-6)


def test_no_supervised_token_is_an_error():
    with pytest.raises(ValueError, match="prompt longer"):
        causal_lm_loss(torch.zeros(1, 2, 3), torch.tensor([[-100, -100]]))
    with pytest.raises(ValueError, match="prompt_lengths"):
        build_lm_labels(torch.ones(1, 2, dtype=torch.long), torch.ones(1, 2), 0, [-1])
