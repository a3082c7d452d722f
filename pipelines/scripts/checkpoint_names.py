"""Checkpoint names as scripts take them (X/Y/Z plot's Checkpoint name axis, a prompt list's `--sd_model`): A1111's
titles ("folder/name.safetensors [hash]") matched the ways a user writes them, and the close ones named when a
written name matches none."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable

MAX_LISTED = 20  # names an error lists when none is close: a server with 300 checkpoints should not print them all


def spellings(title: str) -> tuple[str, ...]:
    """The ways a user may write checkpoint `title`: whole, without " [hash]", its file name, its file name's stem."""
    path = title.split(" [")[0]
    return title, path, os.path.basename(path), os.path.splitext(os.path.basename(path))[0]


def find_checkpoint(names: Iterable[str], value: str) -> str | None:
    """The known name `value` means: exactly, in another case, without the title's " [hash]", or as the file name
    with or without its folder and extension."""
    names = list(names)
    if value in names:
        return value
    folded = value.strip().casefold()
    for name in names:
        if folded in (spelling.casefold() for spelling in spellings(name)):
            return name
    return None


def close_names(names: Iterable[str], value: str) -> list[str]:
    """The known names most like `value` (by any of their spellings), best first; the first `MAX_LISTED` names when
    none is close, so an error always says what would have worked."""
    names = sorted(names, key=str.casefold)
    by_spelling = {spelling.casefold(): name for name in names for spelling in spellings(name)}
    close = difflib.get_close_matches(value.strip().casefold(), list(by_spelling), n=len(by_spelling), cutoff=0.6)
    found = list(dict.fromkeys(by_spelling[spelling] for spelling in close))[:5]
    return found or names[:MAX_LISTED]
