"""Attribute warm-up of the captioner's vision tower, before any BLIP-2 stage.

tiny-clip's tower was trained contrastively, where the size of a shape hardly matters (a caption rarely
differs from its neighbours in size alone), so it holds size only weakly: a linear probe on its tokens
reads it at 90%, and the captioner built on it named sizes at 86-90%. Size is not hard to see (the
shape's area, given its shape, separates the three sizes with a gap of 1.7x), it was just never asked
for. Here the tower is trained, with one linear head per attribute on its CLS output, to read every
attribute of the scene (the judge's label layout: shape, colour, size of each slot, position,
layout, background), so that the Q-Former finds each of them one linear map away. The heads are
thrown away afterwards; only the tower's weights change. Left alone, that training moves every token far
from the contrastive features (their norm doubled) and the captioner built on it never learnt colour, so
the recipe also keeps the tokens near their old values (`feature_weight`, learning without forgetting).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence

import torch
from torch import nn

from mixkit.data.shapes_vocab import Scene
from mixkit.evaluation.judge_model import IGNORE, JudgeConfig, scene_labels
from mixkit.tiny.recipe_common import warmup_cosine

logger = logging.getLogger(__name__)


def attribute_targets(scenes: Sequence[Scene], config: JudgeConfig | None = None) -> torch.Tensor:
    """(N, heads) class indices in `config.head_sizes()` order; IGNORE where a head does not apply."""
    config = config or JudgeConfig()
    names = list(config.head_sizes())
    return torch.tensor([[scene_labels(scene, config)[name] for name in names] for scene in scenes], dtype=torch.long)


def warm_up_tower(vision: nn.Module, images: torch.Tensor, targets: torch.Tensor, *, steps: int,
                  learning_rate: float, batch_size: int, image_mean: Sequence[float], image_std: Sequence[float],
                  seed: int = 0, config: JudgeConfig | None = None, log_every: int = 400,
                  feature_weight: float = 0.0) -> list[dict]:
    """Train `vision` (a CLIPVisionModel) in place to read `targets` from its last layer's CLS token.

    `images` is (N, 3, S, S) uint8, kept as bytes so 16,000 of them cost 200 MB, not 800. Returns the
    curve: per `log_every` steps, the mean loss and each head's accuracy on the batches since the last entry.
    `feature_weight` > 0 adds that weight times the mean squared distance of every last-layer token from
    what the tower gave before the warm-up (a frozen copy), as "learning without forgetting" does: the
    captioners built on towers warmed up without it never learnt colour (README).
    """
    config = config or JudgeConfig()
    if images.dtype != torch.uint8 or images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"images must be a (N, 3, S, S) uint8 tensor, got {images.dtype} {tuple(images.shape)}")
    if targets.shape != (images.shape[0], len(config.head_sizes())):
        raise ValueError(f"targets must be ({images.shape[0]}, {len(config.head_sizes())}), got {tuple(targets.shape)}")
    # Every random number (the heads' init, a dropout the tower may have) comes from `seed` in a forked RNG: the heads
    # used to take torch's global state as they found it, so the tower after the warm-up (and the recipe's captioner)
    # differed with whatever ran before in the process, and the caller's RNG moved by what the warm-up drew.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _warm_up(vision, images, targets, steps=steps, learning_rate=learning_rate, batch_size=batch_size,
                        image_mean=image_mean, image_std=image_std, seed=seed, config=config, log_every=log_every,
                        feature_weight=feature_weight)


def _warm_up(vision: nn.Module, images: torch.Tensor, targets: torch.Tensor, *, steps: int, learning_rate: float,
             batch_size: int, image_mean: Sequence[float], image_std: Sequence[float], seed: int,
             config: JudgeConfig, log_every: int, feature_weight: float) -> list[dict]:
    hidden = vision.config.hidden_size
    heads = nn.ModuleList([nn.Linear(hidden, size) for size in config.head_sizes().values()])
    # The heads read the CLS token of `last_hidden_state`, the features the Q-Former cross-attends to.
    mean = torch.tensor(image_mean).view(1, 3, 1, 1)
    std = torch.tensor(image_std).view(1, 3, 1, 1)
    parameters = list(vision.parameters()) + list(heads.parameters())
    optimizer = torch.optim.AdamW(parameters, lr=learning_rate, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_cosine(step, steps, min(100, steps)))
    generator = torch.Generator().manual_seed(seed)
    original = copy.deepcopy(vision).eval().requires_grad_(False) if feature_weight > 0 else None
    was_training = vision.training
    vision.train()
    curve, losses, hits, counts = [], [], torch.zeros(len(heads)), torch.zeros(len(heads))
    for step in range(steps):
        index = torch.randint(0, images.shape[0], (batch_size,), generator=generator)
        pixels = (images[index].float() / 255.0 - mean) / std
        batch_targets = targets[index]
        features = vision(pixel_values=pixels).last_hidden_state  # what the Q-Former reads, before post_layernorm
        cls = features[:, 0]
        loss = torch.zeros(())
        if original is not None:
            with torch.no_grad():
                before = original(pixel_values=pixels).last_hidden_state
            loss = feature_weight * nn.functional.mse_loss(features, before)
        for i, head in enumerate(heads):
            wanted = batch_targets[:, i]
            applies = wanted != IGNORE
            if applies.any():
                logits = head(cls[applies])
                loss = loss + nn.functional.cross_entropy(logits, wanted[applies])
                hits[i] += (logits.argmax(-1) == wanted[applies]).sum()
                counts[i] += applies.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(float(loss.detach()))
        if (step + 1) % log_every == 0 or step + 1 == steps:
            accuracy = {name: round(float(hits[i] / counts[i]), 4)
                        for i, name in enumerate(config.head_sizes()) if counts[i] > 0}
            curve.append({"step": step + 1, "loss": round(sum(losses) / len(losses), 4), "accuracy": accuracy})
            logger.info("tower warm-up step %d: loss %.3f, %s", step + 1, curve[-1]["loss"], accuracy)
            losses, hits, counts = [], torch.zeros(len(heads)), torch.zeros(len(heads))
    vision.train(was_training)
    return curve
