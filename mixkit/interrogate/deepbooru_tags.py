"""A1111's DeepBooru answer: the tags a tagger scored at or above the threshold, formatted as its Settings say.

`DeepbooruSettings` holds A1111's options (`interrogate_deepbooru_score_threshold`, `deepbooru_sort_alpha`,
`deepbooru_use_spaces`, `deepbooru_escape`, `deepbooru_filter_tags`, plus `interrogate_return_ranks`), and
`format_tags` applies them in A1111's order: threshold, `rating:*` tags dropped, sort, filter, spaces, escape, rank.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

RATING_PREFIX = "rating:"  # DeepDanbooru's rating:safe / rating:questionable / rating:explicit are not prompt tags
# A1111 escapes backslashes and round brackets only (its `re_special`), the characters its prompt parser reads as
# emphasis; square brackets are left as they are, as in A1111.
ESCAPED = re.compile(r"([\\()])")


@dataclass(frozen=True)
class DeepbooruSettings:
    """A1111's DeepBooru options, with its defaults (Settings > Interrogate)."""

    score_threshold: float = 0.5
    sort_alpha: bool = True
    use_spaces: bool = True
    escape: bool = True
    filter_tags: str = ""
    return_ranks: bool = False

    def __post_init__(self) -> None:
        threshold = self.score_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise ValueError("interrogate_deepbooru_score_threshold must be a number in [0, 1] (A1111's slider), "
                             f"got {threshold!r}.")
        object.__setattr__(self, "score_threshold", float(threshold))
        for name in ("sort_alpha", "use_spaces", "escape"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"deepbooru_{name} must be true or false, got {getattr(self, name)!r}.")
        if not isinstance(self.return_ranks, bool):
            raise ValueError(f"interrogate_return_ranks must be true or false, got {self.return_ranks!r}.")
        if not isinstance(self.filter_tags, str):
            raise ValueError("deepbooru_filter_tags must be a comma-separated string of tags (e.g. \"1girl, solo\"), "
                             f"got {self.filter_tags!r}.")

    def filtered(self) -> set[str]:
        """The tags to leave out, in the tagger's spelling (A1111 turns the list's spaces into underscores)."""
        return {tag.strip().replace(" ", "_") for tag in self.filter_tags.split(",")}


def format_tags(tags: Sequence[str], probabilities: Sequence[float], settings: DeepbooruSettings) -> str:
    """A1111's `tag_multi` text for one image: "tag, tag" or "(tag:0.950), ..." with ranks.

    `probabilities[i]` is the score of `tags[i]`. Tags scoring below the threshold and `rating:` tags are dropped;
    the rest are sorted by name (`sort_alpha`) or by falling score (ties keep the tag list's order), the filtered
    ones removed, then underscores become spaces, `\\ ( )` are backslash-escaped and the score appended, each as set.
    """
    if len(tags) != len(probabilities):
        raise ValueError(f"{len(tags)} tags but {len(probabilities)} probabilities; the tagger's tag list does not "
                         "match its output.")
    scores = {}
    for tag, probability in zip(tags, probabilities):
        probability = float(probability)
        if math.isnan(probability) or probability < settings.score_threshold or tag.startswith(RATING_PREFIX):
            continue
        scores[tag] = probability
    if settings.sort_alpha:
        ordered = sorted(scores)
    else:
        ordered = sorted(scores, key=lambda tag: -scores[tag])  # stable: equal scores keep the list's order
    filtered = settings.filtered()
    written = []
    for tag in ordered:
        if tag in filtered:
            continue
        text = tag.replace("_", " ") if settings.use_spaces else tag
        if settings.escape:
            text = ESCAPED.sub(r"\\\1", text)
        written.append(f"({text}:{scores[tag]:.3f})" if settings.return_ranks else text)
    return ", ".join(written)
