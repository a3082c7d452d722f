"""Re-link `<lora:NAME:...>` tags of a pasted infotext to the local files their `Lora hashes` name.

A Civitai image's infotext names LoRAs by the uploader's file names; the local copy is often renamed.
A1111's paste (its Lora extension's `infotext_pasted`) looks each tag's name up in the infotext's
`Lora hashes` and, when a local file has that short hash, rewrites the tag to the local name. The same
here; tags without a hash, or whose hash no local file has, stay as written.
"""

from __future__ import annotations

import re
from typing import Callable

_TAG_NAME = re.compile(r"<lora:([^:>]+):")


def parse_lora_hashes(text: str) -> dict[str, str]:
    """`Lora hashes: "name: 1234abcd5678, other: ..."` as {name: short hash} (names never hold ':' or ',')."""
    hashes = {}
    for item in str(text).split(","):
        name, sep, short = item.partition(":")
        if sep and name.strip() and short.strip():
            hashes[name.strip()] = short.strip().lower()
    return hashes


def relink_lora_tags(prompt: str, lora_hashes: str | None, local_name_of: Callable[[str], str | None]) -> str:
    """`prompt` with each tag whose name has a hash in `lora_hashes` renamed to `local_name_of(hash)` when known."""
    if not lora_hashes:
        return prompt
    hashes = parse_lora_hashes(lora_hashes)

    def relinked(match: re.Match) -> str:
        short = hashes.get(match.group(1))
        local = local_name_of(short) if short else None
        return f"<lora:{local}:" if local else match.group(0)

    return _TAG_NAME.sub(relinked, prompt)


def library_lookup(library) -> Callable[[str], str | None]:
    """`local_name_of` for a `LoraLibrary`: the relative name of the file with that short hash."""

    def local_name_of(short_hash: str) -> str | None:
        entry = library.find_by_short_hash(short_hash)
        return entry.relative_name if entry is not None else None

    return local_name_of
