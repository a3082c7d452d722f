"""Training objectives for vision-language models, as pure functions over tensors.

Each loss takes what a model produced (features, logits, token ids) and returns a scalar; none
owns parameters, so freezing is decided by the model parts that produced the inputs.
"""

from mixkit.training.losses.clip_contrastive import clip_contrastive_loss, gather_with_grad, logit_scale_value
from mixkit.training.losses.blip2_stage1 import (
    blip2_itc_loss,
    blip2_itg_loss,
    blip2_itm_loss,
    blip2_query_text_similarity,
    multimodal_causal_mask,
    sample_itm_hard_negatives,
)
from mixkit.training.losses.blip2_stage2 import build_lm_labels, causal_lm_loss

__all__ = [
    "blip2_itc_loss",
    "blip2_itg_loss",
    "blip2_itm_loss",
    "blip2_query_text_similarity",
    "build_lm_labels",
    "causal_lm_loss",
    "clip_contrastive_loss",
    "gather_with_grad",
    "logit_scale_value",
    "multimodal_causal_mask",
    "sample_itm_hard_negatives",
]
