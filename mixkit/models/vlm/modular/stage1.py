"""BLIP-2 stage-1 pre-training step: the Q-Former learns from a frozen image encoder with ITC, ITM, ITG.

The losses themselves are pure functions in `mixkit.training.losses`; this module owns only the
small heads stage 1 adds on top of a text-enabled Q-Former and the three forward passes that feed
the losses (the paper's Figure 2): unimodal (queries alone, text alone) for ITC, bidirectional
query+text for ITM, and the multimodal causal mask for ITG.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from mixkit.models.vlm.modular.bridges import QFormerBridge
from mixkit.training.losses import (
    blip2_itc_loss,
    blip2_itg_loss,
    blip2_itm_loss,
    multimodal_causal_mask,
    sample_itm_hard_negatives,
)


@dataclass
class Stage1Losses:
    itc: torch.Tensor
    itm: torch.Tensor
    itg: torch.Tensor

    @property
    def total(self) -> torch.Tensor:
        return self.itc + self.itm + self.itg


class Blip2Stage1Heads(nn.Module):
    """ITC projections (256-d in BLIP-2), the 2-way ITM classifier, the ITG LM head, and the temperature."""

    def __init__(self, hidden_size: int, vocab_size: int, embed_dim: int = 256, temperature: float = 0.07) -> None:
        super().__init__()
        self.vision_projection = nn.Linear(hidden_size, embed_dim)
        self.text_projection = nn.Linear(hidden_size, embed_dim)
        self.itm_head = nn.Linear(hidden_size, 2)
        self.lm_head = nn.Linear(hidden_size, vocab_size)
        self.temperature = nn.Parameter(torch.tensor(temperature))


def _padding_mask(text_mask: torch.Tensor, num_queries: int) -> torch.Tensor:
    """Bidirectional (batch, Q+T, Q+T) mask that hides padded text columns."""
    batch, length = text_mask.shape
    keys = torch.cat([torch.ones(batch, num_queries, dtype=torch.bool, device=text_mask.device), text_mask.bool()], 1)
    return keys.unsqueeze(1).expand(batch, num_queries + length, num_queries + length)


def blip2_stage1_losses(
    vision_encoder: nn.Module,
    bridge: QFormerBridge,
    heads: Blip2Stage1Heads,
    pixel_values: torch.Tensor,
    text_ids: torch.Tensor,
    text_mask: torch.Tensor,
    *,
    generator: torch.Generator | None = None,
) -> Stage1Losses:
    """ITC + ITM + ITG on one batch of matched (image, text) pairs; the first text token acts as [CLS]."""
    if bridge.config.qformer.text_vocab_size == 0:
        raise ValueError("stage-1 training needs a Q-Former with a text path: set QFormerConfig.text_vocab_size > 0")
    if text_ids.shape != text_mask.shape or text_ids.shape[0] != pixel_values.shape[0]:
        raise ValueError(
            f"need one text per image: pixel_values {tuple(pixel_values.shape)}, text_ids {tuple(text_ids.shape)}, "
            f"text_mask {tuple(text_mask.shape)}"
        )
    qformer = bridge.qformer
    image = vision_encoder(pixel_values=pixel_values).last_hidden_state
    batch = image.shape[0]
    queries = bridge.query_tokens.expand(batch, -1, -1)
    num_queries = queries.shape[1]

    # ITC: queries alone vs text alone.
    query_out = qformer(queries, image)
    no_queries = queries[:, :0]
    text_out = qformer(no_queries, image, text_ids, _padding_mask(text_mask, 0))
    image_feats = F.normalize(heads.vision_projection(query_out), dim=-1)
    text_feat = F.normalize(heads.text_projection(text_out[:, 0]), dim=-1)
    itc, sim_i2t = blip2_itc_loss(image_feats, text_feat, heads.temperature)

    # ITM: positives plus hard negatives in both directions, queries and text attend to each other.
    negative_text, negative_image = sample_itm_hard_negatives(sim_i2t.detach(), generator=generator)
    images = torch.cat([image, image, image[negative_image]])
    ids = torch.cat([text_ids, text_ids[negative_text], text_ids])
    masks = torch.cat([text_mask, text_mask[negative_text], text_mask])
    fused = qformer(bridge.query_tokens.expand(3 * batch, -1, -1), images, ids, _padding_mask(masks, num_queries))
    itm = blip2_itm_loss(heads.itm_head(fused[:, :num_queries]).mean(dim=1))

    # ITG: text decoded causally, reading the image only through the queries.
    decoded = qformer(queries, image, text_ids, multimodal_causal_mask(num_queries, text_mask))
    itg = blip2_itg_loss(heads.lm_head(decoded[:, num_queries:]), text_ids, text_mask)
    return Stage1Losses(itc=itc, itm=itm, itg=itg)
