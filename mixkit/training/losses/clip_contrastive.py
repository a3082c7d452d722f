"""CLIP's symmetric image-text contrastive loss (Radford et al. 2021, section 2.3).

The logit scale is learned in log space and its exponential is clamped at 100, as in the paper,
so that training cannot make the softmax arbitrarily sharp. Across processes, features from every
rank are all-gathered so each image is contrasted against every text of the global batch; the
local slice keeps its gradient (the others come from other ranks, whose own backward covers them).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

MAX_LOGIT_SCALE = 100.0


def logit_scale_value(log_logit_scale: torch.Tensor, max_scale: float = MAX_LOGIT_SCALE) -> torch.Tensor:
    """exp(log scale) clamped at `max_scale`; gradient stops flowing once the clamp is active."""
    return log_logit_scale.exp().clamp(max=max_scale)


def _distributed_world() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def gather_with_grad(features: torch.Tensor) -> torch.Tensor:
    """Concatenate `features` from all ranks along dim 0; this rank's slice keeps its autograd graph."""
    rank, world = _distributed_world()
    if world == 1:
        return features
    gathered = [torch.empty_like(features) for _ in range(world)]
    torch.distributed.all_gather(gathered, features.detach().contiguous())
    gathered[rank] = features
    return torch.cat(gathered, dim=0)


def _check_features(image_features: torch.Tensor, text_features: torch.Tensor) -> None:
    if image_features.ndim != 2 or text_features.ndim != 2:
        raise ValueError(
            f"CLIP loss expects (batch, dim) features, got image {tuple(image_features.shape)} "
            f"and text {tuple(text_features.shape)}"
        )
    if image_features.shape != text_features.shape:
        raise ValueError(
            f"image and text features must pair one to one with equal dims, got image {tuple(image_features.shape)} "
            f"and text {tuple(text_features.shape)}"
        )


def clip_contrastive_loss(
    image_features: torch.Tensor,
    text_features: torch.Tensor,
    log_logit_scale: torch.Tensor,
    *,
    max_logit_scale: float = MAX_LOGIT_SCALE,
    gather: bool = True,
) -> torch.Tensor:
    """Mean of image->text and text->image cross-entropy; pair i of the batch is the positive.

    Features are L2-normalised here, so callers pass raw projections. With `gather` and an
    initialised process group, negatives come from the whole global batch.
    """
    _check_features(image_features, text_features)
    image_features = F.normalize(image_features, dim=-1)
    text_features = F.normalize(text_features, dim=-1)
    scale = logit_scale_value(log_logit_scale, max_logit_scale)
    rank, world = _distributed_world() if gather else (0, 1)
    all_images = gather_with_grad(image_features) if world > 1 else image_features
    all_texts = gather_with_grad(text_features) if world > 1 else text_features
    batch = image_features.shape[0]
    targets = torch.arange(batch, device=image_features.device) + rank * batch
    logits_per_image = scale * image_features @ all_texts.T
    logits_per_text = scale * text_features @ all_images.T
    return (F.cross_entropy(logits_per_image, targets) + F.cross_entropy(logits_per_text, targets)) / 2
