"""Bounds every prompt must respect before any parsing or tokenizing happens.

A prompt comes from a text box, an HTTP body or a PNG's infotext, so it can be anything. Checking
it once, up front, turns a 1 MB paste or a NUL byte into a one-line error instead of a minute of
tokenizing or an encoder crash deep inside transformers.
"""

from __future__ import annotations

import re

MAX_PROMPT_CHARS = 32_768
"""Longest accepted prompt, in characters. A1111 users rarely exceed ~2,000; 32k leaves room for
wildcard-expanded prompts while keeping tokenizing and the per-chunk encoder passes bounded."""

MAX_BRACKET_DEPTH = 100
"""Deepest accepted nesting of ( and [. Emphasis beyond ~30 levels already overflows or underflows
the weights (1.1**-300 is about 4e-13), so nothing meaningful is lost; the bound keeps the schedule
parser's recursion far below Python's limit."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def check_prompt_text(text: object, *, what: str = "prompt") -> str:
    """Validate one prompt string; return it unchanged or raise a ValueError/TypeError naming the problem."""
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, got {type(text).__name__}: {text!r:.80}")
    if len(text) > MAX_PROMPT_CHARS:
        raise ValueError(
            f"{what} is {len(text):,} characters long; the limit is {MAX_PROMPT_CHARS:,} "
            f"(mixkit.prompts.limits.MAX_PROMPT_CHARS). Shorten the prompt."
        )
    nul = text.find("\x00")
    if nul >= 0:
        raise ValueError(f"{what} contains a NUL character at index {nul}; remove it (it usually comes from a binary paste).")
    surrogate = _SURROGATE.search(text)
    if surrogate:
        raise ValueError(
            f"{what} contains a lone surrogate {surrogate.group()!r} at index {surrogate.start()}, which is not "
            f"valid Unicode text; re-encode the prompt as UTF-8."
        )
    depth = bracket_depth(text)
    if depth > MAX_BRACKET_DEPTH:
        raise ValueError(
            f"{what} nests brackets {depth} levels deep; the limit is {MAX_BRACKET_DEPTH} "
            f"(mixkit.prompts.limits.MAX_BRACKET_DEPTH). Use (text:weight) instead of many nested brackets."
        )
    return text


def bracket_depth(text: str) -> int:
    """Deepest nesting of unescaped ( and [ in `text` (closers never take the depth below zero)."""
    depth = deepest = 0
    escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in "([":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]" and depth:
            depth -= 1
    return deepest
