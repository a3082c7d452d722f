"""Appending an interrogator's answer to a caption file that is already there (`mixkit interrogate --write-captions
--existing append`), without writing a tag twice.

A caption file is comma-separated parts (kohya's `caption_separator`, DeepBooru's tag text). The answer comes as its
own parts: DeepBooru's tags, or CLIP's caption followed by its ranked terms. Each part not already in the file is
appended after the file's text, which is kept as written (a hand-edited caption keeps its own spacing and order).
Parts are compared as tags, not as bytes: `long_hair` and `long hair` (DeepBooru's use-spaces setting), `hat
\\(object\\)` and `hat (object)` (its escaping), `(1girl:0.953)` and `1girl` (`--return-ranks`) and letter case do
not make a tag new. CLIP's caption may itself hold commas (`a red circle , on a blue background`): it counts as there
when its pieces stand one after another in the file.
"""

from __future__ import annotations

import re

SEPARATOR = ", "  # A1111's and kohya's between tags
_RANKED = re.compile(r"^\((.*):-?\d+(?:\.\d+)?\)$", re.DOTALL)  # `(tag:0.953)`, A1111's "Include ranks"
_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


def tag_key(tag: str) -> str:
    """What two spellings of one tag share: no rank, no escaping, underscores as spaces, single spaces, lower case."""
    tag = tag.strip()
    ranked = _RANKED.match(tag)
    if ranked:
        tag = ranked.group(1)
    tag = _ESCAPED.sub(r"\1", tag).replace("_", " ")
    return " ".join(tag.split()).lower()


def _keys(text: str) -> list[str]:
    return [key for key in (tag_key(piece) for piece in text.split(",")) if key]


def _holds_run(keys: list[str], run: list[str]) -> bool:
    """Whether `run` stands in `keys` as consecutive entries."""
    return any(keys[start:start + len(run)] == run for start in range(len(keys) - len(run) + 1))


def new_parts(existing: str, parts: list[str]) -> list[str]:
    """The answer's parts that `existing` (a caption file's text) does not hold yet, in the answer's order; a part
    repeated within the answer is taken once."""
    keys = _keys(existing)
    added = []
    for part in parts:
        run = _keys(part)
        if run and not _holds_run(keys, run):
            added.append(part.strip())
            keys += run
    return added


def appended_caption(existing: str, parts: list[str]) -> str | None:
    """`existing` with the answer's new parts appended after a comma; None when every part is already there (the
    file is then left untouched). An empty or blank file simply takes the new parts."""
    added = new_parts(existing, parts)
    if not added:
        return None
    kept = existing.rstrip().rstrip(",").rstrip()  # a trailing comma or newline would double the separator
    return SEPARATOR.join([kept, *added] if kept else added)
