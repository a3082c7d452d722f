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


# kohya rejoins processed tags with ", " for every caption_separator (library/train_util.py, process_caption).
TAG_JOINER = ", "


@dataclass(frozen=True)
class CaptionAugmentation:
    """kohya's `shuffle_caption`, `keep_tokens`, `caption_tag_dropout_rate`, `caption_dropout_rate`,
    `caption_separator`, `caption_prefix`, `caption_suffix`, `keep_tokens_separator`; the defaults change nothing."""

    shuffle: bool = False
    keep_tokens: int = 0
    tag_dropout_rate: float = 0.0
    dropout_rate: float = 0.0
    separator: str = ","
    prefix: str = ""
    suffix: str = ""
    keep_separator: str = ""

    @property
    def active(self) -> bool:
        return bool(self.shuffle or self.tag_dropout_rate > 0 or self.dropout_rate > 0 or self.prefix or self.suffix
                    or self.keep_separator)

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
        for name, value in (("caption_prefix", self.prefix), ("caption_suffix", self.suffix),
                            ("keep_tokens_separator", self.keep_separator)):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a string, got {value!r}")
        if self.keep_separator and (not self.keep_separator.strip() or self.keep_separator.strip() == self.separator):
            raise ValueError(f"keep_tokens_separator must be a non-blank string other than the tag separator, like "
                             f"'|||', got {self.keep_separator!r}")


def augment_caption(caption: str, settings: CaptionAugmentation, rng: random.Random) -> str:
    """The caption as one training step sees it.

    `prefix` and `suffix` are joined on with a space (kohya's caption_prefix / caption_suffix, e.g. a trigger
    word for a whole folder); then the caption is dropped whole with probability `dropout_rate` (empty
    caption); otherwise split at the separator into fixed tags in front, flexible tags, fixed tags at the end:
    with `keep_separator` ("a, b ||| c, d ||| e": kohya's keep_tokens_separator) the parts around it, else
    the first `keep_tokens` tags and the rest. The flexible tags are shuffled (if asked) and each dropped with
    probability `tag_dropout_rate`; all are joined with ", " whatever the separator, as kohya's `process_caption`
    rejoins them (so `a; b; c` with separator ";" trains as `a, b, c`). Unchanged when nothing is active.
    """
    if not settings.active:
        return caption
    caption = " ".join(part for part in (settings.prefix, caption, settings.suffix) if part)
    if settings.dropout_rate and rng.random() < settings.dropout_rate:
        return ""

    def tags(text: str) -> list[str]:
        return [tag.strip() for tag in text.split(settings.separator) if tag.strip()]

    if settings.keep_separator and settings.keep_separator in caption:
        front, flexible_text, *back = caption.split(settings.keep_separator)
        fixed, flexible, tail = tags(front), tags(flexible_text), tags(settings.separator.join(back))
    else:
        every = tags(caption)
        fixed, flexible, tail = every[:settings.keep_tokens], every[settings.keep_tokens:], []
    if settings.shuffle:
        rng.shuffle(flexible)
    if settings.tag_dropout_rate:
        flexible = [tag for tag in flexible if rng.random() >= settings.tag_dropout_rate]
    return TAG_JOINER.join(fixed + flexible + tail)
