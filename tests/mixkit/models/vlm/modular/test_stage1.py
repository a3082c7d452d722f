"""BLIP-2 stage 1 wiring: all three losses train the Q-Former and heads, never the frozen vision encoder."""

from __future__ import annotations

import pytest
import torch

from mixkit.models.vlm.modular import QFormerBridge, QFormerBridgeConfig, QFormerConfig
from mixkit.models.vlm.modular.stage1 import Blip2Stage1Heads, blip2_stage1_losses


def parts():
    from transformers import Blip2VisionConfig, Blip2VisionModel

    torch.manual_seed(0)
    vision = Blip2VisionModel(Blip2VisionConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=1,
                                                num_attention_heads=4, image_size=30, patch_size=10))
    qformer = QFormerConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=24,
                            encoder_hidden_size=32, cross_attention_frequency=1, num_query_tokens=3,
                            text_vocab_size=40, max_position_embeddings=16)
    bridge = QFormerBridge(QFormerBridgeConfig(qformer=qformer, output_size=8))
    return vision.requires_grad_(False), bridge, Blip2Stage1Heads(16, 40, embed_dim=8)


def test_losses_are_finite_and_gradients_skip_frozen_parts():
    vision, bridge, heads = parts()
    text_ids = torch.tensor([[1, 5, 6, 7], [1, 8, 9, 0], [1, 10, 0, 0]])
    text_mask = (text_ids != 0).long()
    losses = blip2_stage1_losses(vision, bridge, heads, torch.randn(3, 3, 30, 30), text_ids, text_mask,
                                 generator=torch.Generator().manual_seed(0))
    for value in (losses.itc, losses.itm, losses.itg):
        assert torch.isfinite(value) and value > 0
    losses.total.backward()
    assert all(p.grad is None for p in vision.parameters())
    for name in ("query_tokens", "qformer.word_embeddings.weight", "qformer.layers.1.text_ffn.up.weight",
                 "qformer.layers.0.cross_attention.query.weight"):
        assert bridge.get_parameter(name).grad.abs().sum() > 0, name
    assert bridge.projection.weight.grad is None  # the LM projection belongs to stage 2
    assert all(p.grad is not None for p in heads.parameters())


def test_stage1_needs_a_text_path():
    vision, bridge, heads = parts()
    bridge.config.qformer.text_vocab_size = 0
    with pytest.raises(ValueError, match="text_vocab_size"):
        blip2_stage1_losses(vision, bridge, heads, torch.randn(2, 3, 30, 30), torch.ones(2, 3, dtype=torch.long),
                            torch.ones(2, 3, dtype=torch.long))
