"""Emphasis modes: how `(word:1.2)` weights change the text encoder's output, chosen by name.

Names and behaviour follow A1111 v1.10's "Emphasis mode" setting (`modules/sd_emphasis.py`). A mode's
`apply` gets one chunk index of a whole encoding batch: A1111 encodes the texts of one prompt's schedule
(`[a:b:5]` -> "a", "b") as one batch, chunk index by chunk index, and "Original" restores the mean of that
whole [B, 77, D] batch, not of each text (see `PromptEncoder.encode_group`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from mixkit.registry import Registry


@dataclass(frozen=True)
class EmphasisMode:
    parse: bool  # whether ( ) [ ] BREAK are syntax at all
    apply: Callable  # (z [B, 77, D], weights [B, 77]) -> z, B = the batch's texts at one chunk index


DEFAULT_EMPHASIS = "Original"  # A1111's default; the only mode its infotext leaves unwritten


def _original(z, weights):
    # Weighting shifts the mean; A1111 restores it so the overall magnitude stays what the UNet was
    # trained on. Its EmphasisOriginal takes `z.mean()` of the whole batch of one chunk index (every
    # text of the schedule, and the empty chunks that pad the shorter ones), so one ratio serves them all.
    # Contiguous first, as A1111's chunk tensor is: the caller's slice of a [B, chunks, 77, D] batch is strided,
    # and its mean is summed in another order than the product's, so with every weight 1 the two means differed in
    # the last bits and a near-zero mean (a tiny model's fresh layer norm) gave 1.5e-9 / 0.0 = inf.
    z = z.contiguous()
    original_mean = z.mean()
    weighted = z * weights.unsqueeze(-1)
    new_mean = weighted.mean()
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


def check_emphasis(name: object) -> str:
    """The registered spelling of emphasis mode `name` ("no norm" -> "No norm"); else an error listing the modes."""
    if not isinstance(name, str):
        raise TypeError(f"emphasis must be a mode name (one of {', '.join(map(repr, EMPHASIS_MODES.names()))}; "
                        f"A1111's 'Emphasis mode' setting), got {type(name).__name__}: {name!r:.80}")
    mode = EMPHASIS_MODES.get(name)  # UnknownNameError (a ValueError) naming the valid modes
    return next(key for key, entry in EMPHASIS_MODES.items() if entry is mode)
