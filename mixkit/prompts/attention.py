"""A1111 emphasis syntax: `(a)`, `[a]`, `(a:1.3)`, escapes and `BREAK`, parsed into weighted text runs.

Behaviour follows AUTOMATIC1111 v1.10 `parse_prompt_attention`, so its docstring examples are our
golden tests. The parser is a single left-to-right scan with two stacks of open brackets; it never
recurses, so any nesting depth is safe.
"""

from __future__ import annotations

import math
import re

ROUND_MULTIPLIER = 1.1
SQUARE_MULTIPLIER = 1 / 1.1
BREAK_MARK = -1
"""A1111 represents `BREAK` as the run ["BREAK", -1]; consumers test `text == "BREAK" and weight == -1`."""

# One alternative per token kind. The explicit weight accepts only well-formed decimals, so `(a:1.2.3)`
# falls back to literal text where A1111 would crash on float("1.2.3").
_TOKEN = re.compile(
    r"""
      (?P<escape>\\[()\[\]\\])              # \( \) \[ \] \\ -> the literal character
    | (?P<backslash>\\)                     # any other backslash is dropped (A1111 quirk: "\\b" -> "b")
    | (?P<open_round>\()
    | (?P<open_square>\[)
    | :\s*(?P<weight>[+-]?(?:\d+\.?\d*|\.\d+))\s*\)   # ":1.3)" closes a round bracket with a weight
    | (?P<close_round>\))
    | (?P<close_square>\])
    | (?P<text>[^\\()\[\]:]+|:)
    """,
    re.VERBOSE,
)
_BREAK = re.compile(r"\s*\bBREAK\b\s*", re.DOTALL)


def parse_prompt_attention(text: str) -> list[list]:
    """Split `text` into [[run, weight], ...] with A1111's emphasis rules.

    >>> parse_prompt_attention("an (important) word")
    [['an ', 1.0], ['important', 1.1], [' word', 1.0]]

    Unclosed brackets apply to the end of the text, stray closers are text, adjacent runs of equal
    weight are merged, and `BREAK` becomes the marker run ["BREAK", -1]. A weight that is not a
    finite number (e.g. 400 digits, or 1.1 ** 10000 from nesting) is a ValueError, never a NaN image.
    """
    runs: list[list] = []
    open_round: list[int] = []
    open_square: list[int] = []

    def scale_from(start: int, factor: float) -> None:
        for run in runs[start:]:
            run[1] *= factor

    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind == "escape":
            runs.append([match.group()[1], 1.0])
        elif kind == "backslash":
            runs.append(["", 1.0])
        elif kind == "open_round":
            open_round.append(len(runs))
        elif kind == "open_square":
            open_square.append(len(runs))
        elif kind == "weight" and open_round:
            scale_from(open_round.pop(), float(match.group("weight")))
        elif kind == "close_round" and open_round:
            scale_from(open_round.pop(), ROUND_MULTIPLIER)
        elif kind == "close_square" and open_square:
            scale_from(open_square.pop(), SQUARE_MULTIPLIER)
        else:
            # plain text, or a closer / weight with nothing open: A1111 keeps it verbatim
            for index, part in enumerate(_BREAK.split(match.group())):
                if index:
                    runs.append(["BREAK", BREAK_MARK])
                runs.append([part, 1.0])

    for start in open_round:
        scale_from(start, ROUND_MULTIPLIER)
    for start in open_square:
        scale_from(start, SQUARE_MULTIPLIER)

    if not runs:
        runs = [["", 1.0]]
    merged: list[list] = [runs[0]]
    for run in runs[1:]:
        if run[1] == merged[-1][1]:
            merged[-1][0] += run[0]
        else:
            merged.append(run)
    for run_text, weight in merged:
        if not math.isfinite(weight):
            raise ValueError(
                f"prompt emphasis gives {run_text[:40]!r} the weight {weight}, which is not a finite number; "
                f"use a weight like (text:1.5) instead of extreme values or very deep nesting."
            )
    return merged
