"""Horizontal flips of training images (kohya's flip_aug), drawn per (seed, micro-batch, row).

Why: a subject photographed mostly from one side, or a dataset of a few images, teaches the model
that side; a mirrored copy half of the time doubles the views for free. Not for subjects whose
handedness matters (text, logos, asymmetric characters). The draw depends on the run's seed and the
micro-batch only, so a resumed run flips the same rows; a flipped image is a different image to the
VAE (its encoder is not mirror-symmetric), so cached latents are kept per (image, flipped).
"""

from __future__ import annotations

import random

import torch


def flip_draws(seed: int, micro_batch: int, rows: int) -> list[bool]:
    """Which rows of micro-batch `micro_batch` are mirrored: each with probability 1/2."""
    rng = random.Random(f"{seed}:{micro_batch}:flip")
    return [rng.random() < 0.5 for _ in range(rows)]


def flip_rows(batch: dict, flips: list[bool]) -> dict:
    """The batch with the pixels (and loss masks) of the flipped rows mirrored left to right."""
    rows = [row for row, flip in enumerate(flips) if flip]
    if not rows:
        return batch
    flipped = dict(batch)
    for key in ("pixels", "masks"):
        if key in batch:
            values = batch[key].clone()
            values[rows] = torch.flip(values[rows], dims=[-1])
            flipped[key] = values
    return flipped
