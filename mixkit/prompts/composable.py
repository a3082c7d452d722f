"""`AND` (composable diffusion, Liu et al. 2022): one prompt becomes several weighted sub-prompts.

Each sub-prompt is denoised separately and the predictions are combined in CFG as
`uncond + sum_i w_i * cfg * (cond_i - uncond)`. Splitting and weight syntax follow A1111 v1.10
`get_multicond_prompt_list`: the upper-case word AND separates parts, an optional trailing `:number`
is the part's weight, leading whitespace of a part is kept and trailing whitespace dropped.
"""

from __future__ import annotations

import re

_AND = re.compile(r"\bAND\b")
# text, then an optional ":weight" at the very end. "." does not cross newlines, so (as in A1111) a
# part spanning several lines keeps its ":weight" as text and gets weight 1.
_PART_WEIGHT = re.compile(r"^(\s*.*?)(?:\s*:\s*([-+]?(?:\d+\.?|\d*\.\d+)))?\s*$")


def split_and_parts(prompt: str) -> list[tuple[str, float]]:
    """[(text, weight), ...] for the AND-separated parts of one prompt."""
    parts = []
    for part in _AND.split(prompt):
        match = _PART_WEIGHT.search(part)
        if match is None:
            parts.append((part, 1.0))
        else:
            text, weight = match.groups()
            parts.append((text, float(weight) if weight is not None else 1.0))
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
