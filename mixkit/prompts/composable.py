"""`AND` (composable diffusion, Liu et al. 2022): one prompt becomes several weighted sub-prompts.

Each sub-prompt is denoised separately and the predictions are combined in CFG as
`uncond + sum_i w_i * cfg * (cond_i - uncond)`. Splitting and weight syntax follow A1111 v1.10
`get_multicond_prompt_list`: the upper-case word AND separates parts, an optional trailing `:number`
is the part's weight, leading whitespace of a part is kept and trailing whitespace dropped.
"""

from __future__ import annotations

import re

_AND = re.compile(r"\bAND\b")
# text, then an optional ":weight" at the very end; the text may span lines (A1111 v1.10's `(?:\s|.)*?`, from
# its commit 28bd8e1: before it, a part spanning several lines kept its ":weight" as text).
_PART_WEIGHT = re.compile(r"^((?:\s|.)*?)(?:\s*:\s*([-+]?(?:\d+\.?|\d*\.\d+)))?\s*$")
# Far beyond any use (AND weights are used near -1..2); a larger one overflows CFG into a black image.
MAX_PART_WEIGHT = 100.0


def count_and_parts(prompt: str) -> int:
    """How many parts `split_and_parts` makes of `prompt`, without parsing their weights."""
    return len(_AND.findall(prompt)) + 1


def split_and_parts(prompt: str) -> list[tuple[str, float]]:
    """[(text, weight), ...] for the AND-separated parts of one prompt."""
    parts = []
    for part in _AND.split(prompt):
        text, weight = _PART_WEIGHT.search(part).groups()  # always matches: every group may be empty
        value = float(weight) if weight is not None else 1.0
        if not abs(value) <= MAX_PART_WEIGHT:  # also catches inf (a weight of 400 digits parses as inf)
            raise ValueError(f"AND part {text.strip()[:40]!r} has weight {weight}, beyond ±{MAX_PART_WEIGHT:g}: it would "
                             "overflow into a black image; use weights near -1..2, like 'a cat AND a dog:0.8'")
        parts.append((text, value))
    return parts


def get_multicond_prompt_list(prompts: list[str]) -> tuple[list[list[tuple[int, float]]], list[str], dict[str, int]]:
    """A1111's AND split of a batch: (per prompt [(flat index, weight)], flat texts, text -> index).

    Identical part texts share one flat index, so they are scheduled and encoded once.
    """
    if isinstance(prompts, str) or not isinstance(prompts, (list, tuple)):
        raise TypeError(f"prompts must be a list of str, got {type(prompts).__name__}")
    indexes: list[list[tuple[int, float]]] = []
    flat: list[str] = []
    index_of: dict[str, int] = {}
    for prompt in prompts:
        row = []
        for text, weight in split_and_parts(prompt):
            if text not in index_of:
                index_of[text] = len(flat)
                flat.append(text)
            row.append((index_of[text], weight))
        indexes.append(row)
    return indexes, flat, index_of
