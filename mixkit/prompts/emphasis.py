"""Emphasis modes: how `(word:1.2)` weights change the text encoder's output, chosen by name.

Names and behaviour follow A1111 v1.10's "Emphasis mode" setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from mixkit.registry import Registry


@dataclass(frozen=True)
class EmphasisMode:
    parse: bool  # whether ( ) [ ] BREAK are syntax at all
    apply: Callable  # (z [C, 77, D], weights [C, 77]) -> z


def _original(z, weights):
    # Weighting shifts the chunk's mean; A1111 restores it so the overall magnitude stays what the
    # UNet was trained on. Means are per chunk, over all tokens and channels.
    original_mean = z.mean(dim=(1, 2), keepdim=True)
    weighted = z * weights.unsqueeze(-1)
    new_mean = weighted.mean(dim=(1, 2), keepdim=True)
    # A zero-mean chunk (possible with freshly initialised layer norms) has nothing to restore; 0/0
    # would be NaN. A zero weighted mean of a non-zero chunk stays NaN and the encoder reports it.
    ratio = torch.where((new_mean == 0) & (original_mean == 0), torch.ones_like(new_mean), original_mean / new_mean)
    return weighted * ratio


def _no_norm(z, weights):
    return z * weights.unsqueeze(-1)


def _unchanged(z, weights):
    return z


EMPHASIS_MODES: Registry[EmphasisMode] = Registry("emphasis mode")
EMPHASIS_MODES.register("Original", EmphasisMode(parse=True, apply=_original))
EMPHASIS_MODES.register("No norm", EmphasisMode(parse=True, apply=_no_norm))
EMPHASIS_MODES.register("Ignore", EmphasisMode(parse=True, apply=_unchanged))  # syntax parsed, weights ignored
EMPHASIS_MODES.register("None", EmphasisMode(parse=False, apply=_unchanged))  # brackets are plain text
