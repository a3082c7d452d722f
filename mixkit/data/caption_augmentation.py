"""Caption augmentation for tag-style captions ("1girl, red hair, smile"), as kohya's trainers do it.

Why: a model trained on tags always in the same order learns the order (and ties the first tags to
the image); shuffling them, keeping the first `keep_tokens` (usually the trigger word) in place,
dropping single tags (the concept survives a missing tag) and now and then dropping the whole
caption (the model also learns the unconditional image, which classifier-free guidance needs) are
the usual fixes. Pure functions of the caption and a `random.Random`, so a run that seeds it from
(seed, micro-batch, row) draws the same captions on resume.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class CaptionAugmentation:
    """kohya's `shuffle_caption`, `keep_tokens`, `caption_tag_dropout_rate`, `caption_dropout_rate`,
    `caption_separator`; the defaults change nothing."""

    shuffle: bool = False
    keep_tokens: int = 0
    tag_dropout_rate: float = 0.0
    dropout_rate: float = 0.0
    separator: str = ","

    @property
    def active(self) -> bool:
        return self.shuffle or self.tag_dropout_rate > 0 or self.dropout_rate > 0

    def check(self) -> None:
        """Raise ValueError/TypeError naming the first setting out of range (config names, as users set them)."""
        if not isinstance(self.shuffle, bool):
            raise TypeError(f"shuffle_caption must be true or false, got {self.shuffle!r}")
        keep = self.keep_tokens
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise ValueError(f"keep_tokens must be an integer >= 0 (the leading tags that never move or drop), "
                             f"got {keep!r}")
        for name, rate in (("caption_tag_dropout_rate", self.tag_dropout_rate),
                           ("caption_dropout_rate", self.dropout_rate)):
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
                raise ValueError(f"{name} must be a probability in [0, 1], got {rate!r}")
        if not isinstance(self.separator, str) or not self.separator.strip():
            raise ValueError(f"caption_separator must be a non-blank string like ',', got {self.separator!r}")


def augment_caption(caption: str, settings: CaptionAugmentation, rng: random.Random) -> str:
    """The caption as one training step sees it.

    Dropped whole with probability `dropout_rate` (empty caption); otherwise split at the separator,
    the first `keep_tokens` tags kept in front, the others shuffled (if asked) and each dropped with
    probability `tag_dropout_rate`, then joined with "<separator> ". Unchanged when nothing is active.
    """
    if not settings.active:
        return caption
    if settings.dropout_rate and rng.random() < settings.dropout_rate:
        return ""
    tags = [tag.strip() for tag in caption.split(settings.separator)]
    tags = [tag for tag in tags if tag]
    fixed, flexible = tags[:settings.keep_tokens], tags[settings.keep_tokens:]
    if settings.shuffle:
        rng.shuffle(flexible)
    if settings.tag_dropout_rate:
        flexible = [tag for tag in flexible if rng.random() >= settings.tag_dropout_rate]
    return f"{settings.separator} ".join(fixed + flexible)
