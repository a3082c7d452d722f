"""Extra-network tags such as `<lora:name:0.8>`: removed from the prompt text, returned as requests.

Syntax follows A1111 v1.10: `<kind:arg1:arg2:...>`; arguments containing "=" are named
(`te=0.5`, `unet=1`, `dyn=8`; others, such as LoRA Block Weight's `lbw=`, are ignored with a warning, as A1111
ignores them), the others positional. For LoRA-like kinds the positional arguments
are name, text-encoder weight, UNet weight and dyn dim; the UNet weight defaults to the text-encoder
weight, which defaults to 1. Applying the networks is the LoRA module's job; this one only parses.

What is a tag is A1111's `re_extra_net`, `<(\w+):([^>]+)>`: any word kind, so `<3:love>` and `<foo:bar>` are tags
too. Tags of a kind this parser does not apply (`<3:...>`, `<Lora:...>`: A1111's kinds are case-sensitive, and
`hypernet`, applied by `mixkit.hypernetworks` when a hypernetwork folder is set)
are removed from the prompt like every tag, and skipped with a warning, as A1111's `extra_networks.activate` skips
an unknown kind ("Skipping unknown extra network") (`unknown_extra_network_tags`, `warn_skipped_extra_networks`).
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass

# A1111's regex with `*` for `+`, so that `<lora:>` is refused as a LoRA tag without a name instead of staying text;
# for other kinds an empty body stays text, as A1111's `+` leaves it.
_TAG = re.compile(r"<(\w+):([^>]*)>")
# The kinds whose tags are parsed and applied (as LoRAs; A1111 accepted `lyco` for LyCORIS files before merging both
# into `lora`); any other kind is removed from the prompt and skipped with a warning.
APPLIED_KINDS = ("lora", "lyco")
# Named arguments a tag's weights are read from; any other (`lbw=`, `start=`, ...) is ignored with a warning.
APPLIED_NAMED_ARGUMENTS = ("te", "unet", "dyn")


@dataclass(frozen=True)
class ExtraNetworkRequest:
    """One `<kind:name:...>` tag of a prompt."""

    kind: str  # "lora", "lyco", "hypernet", ...: the caller decides which kinds it supports
    name: str
    te_weight: float
    unet_weight: float
    raw: str  # the tag as written, for error messages and infotext
    dyn_dim: int | None = None


def _number(raw: str, field: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"extra network tag {raw!r}: {field} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"extra network tag {raw!r}: {field} must be finite, got {value!r}")
    return number


def parse_extra_network_tag(kind: str, body: str, raw: str) -> ExtraNetworkRequest:
    positional: list[str] = []
    named: dict[str, str] = {}
    for item in body.split(":"):
        key, sep, value = item.partition("=")
        if sep:
            named[key.strip()] = value.strip()
        else:
            positional.append(item)
    unknown = sorted(set(named) - set(APPLIED_NAMED_ARGUMENTS))
    if unknown:
        # A1111's `ExtraNetworkLora.activate` reads only te/unet/dyn and ignores the rest, so Civitai prompts written
        # for extensions (LoRA Block Weight's `lbw=MIDD`, loractl's `start=`/`stop=`) still apply the LoRA.
        warnings.warn(f"extra network tag {raw!r}: named argument(s) {', '.join(unknown)} are ignored (as in A1111 "
                      f"without extensions; block weights and step ranges are not applied); only "
                      f"{', '.join(APPLIED_NAMED_ARGUMENTS)} are read", UserWarning, stacklevel=3)
    name = positional[0].strip() if positional else ""
    if not name:
        raise ValueError(f"extra network tag {raw!r} has no name; write it as <{kind}:name:weight>")
    if len(positional) > 4:
        raise ValueError(f"extra network tag {raw!r} has {len(positional)} positional fields; at most 4 (name:te:unet:dyn)")
    te = _number(raw, "te weight", positional[1]) if len(positional) > 1 else 1.0
    te = _number(raw, "te weight", named["te"]) if "te" in named else te
    unet = _number(raw, "unet weight", positional[2]) if len(positional) > 2 else te
    unet = _number(raw, "unet weight", named["unet"]) if "unet" in named else unet
    dyn_text = named.get("dyn", positional[3] if len(positional) > 3 else None)
    dyn = None
    if dyn_text is not None:
        if not dyn_text.strip().isdigit():
            raise ValueError(f"extra network tag {raw!r}: dyn must be a positive integer, got {dyn_text!r}")
        dyn = int(dyn_text)
    return ExtraNetworkRequest(kind=kind, name=name, te_weight=te, unet_weight=unet, raw=raw, dyn_dim=dyn)


def extract_extra_networks(prompt: str) -> tuple[str, list[ExtraNetworkRequest]]:
    """Remove every `<kind:...>` tag from `prompt`; return (cleaned prompt, requests of `APPLIED_KINDS` in order).

    A malformed LoRA tag (`<lora:>`, `<lora::1>`, `<lora:x:abc>`) is a ValueError naming the tag, so a
    typo never silently drops a LoRA. Tags of other kinds (`<hypernet:x:1>`, `<3:love>`) are removed unread, as
    A1111 removes them; `unknown_extra_network_tags` lists them for the warning. Text like `<3`, `a < b` or
    `<foo:>` is not a tag and stays.
    """
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    requests: list[ExtraNetworkRequest] = []

    def take(match: re.Match) -> str:
        kind, body = match.group(1), match.group(2)
        if kind not in APPLIED_KINDS:
            return "" if body else match.group()
        requests.append(parse_extra_network_tag(kind, body, match.group()))
        return ""

    cleaned = _TAG.sub(take, prompt)
    return cleaned, requests


def find_extra_network_tags(text: str) -> list[str]:
    """Every `<kind:...>` tag of `text` as written, without parsing or removing it (a negative prompt's tags,
    which A1111 leaves in place as text, so even a malformed one is no error there)."""
    if not isinstance(text, str):
        raise TypeError(f"prompt must be a str, got {type(text).__name__}")
    return [match.group() for match in _TAG.finditer(text)]


def unknown_extra_network_tags(prompt: str) -> list[str]:
    """The tags `extract_extra_networks` removes from `prompt` without applying them (kinds not in `APPLIED_KINDS`),
    as written, in order."""
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    return [match.group() for match in _TAG.finditer(prompt) if match.group(1) not in APPLIED_KINDS and match.group(2)]


def warn_skipped_extra_networks(tags: list[str], stacklevel: int = 2) -> None:
    """One warning per skipped tag, as A1111's `extra_networks.activate` logs "Skipping unknown extra network".

    A hypernetwork gets its own words: it is skipped only when no hypernetwork folder is set (the pipelines apply
    `<hypernet:...>` tags from their `hypernetwork_dir`, `mixkit.hypernetworks`), and A1111 applies a file of that
    name from its models/hypernetworks folder, so without the folder the same infotext (which keeps the tag in its
    prompt, as A1111's does) can make another image there.
    """
    for tag in dict.fromkeys(tags):
        kind = tag[1:tag.index(":")]
        if kind == "hypernet":
            message = (f"prompt: {tag} removed and not applied: no hypernetwork folder is set. Pass "
                       "hypernetwork_dir= (CLI and server: --hypernetwork-dir, A1111's models/hypernetworks) to apply "
                       "the .pt file of that name, as A1111 does; the infotext keeps the tag.")
        else:
            applied = ", ".join(f"<{applied_kind}:name:weight>" for applied_kind in APPLIED_KINDS)
            message = (f"prompt: skipping unknown extra network {kind!r}: {tag} removed from the prompt and not "
                       f"applied, as A1111 does; mixkit applies only {applied} tags (kinds are case-sensitive). "
                       "Write the text without '<kind:' if it was meant as text.")
        warnings.warn(message, UserWarning, stacklevel=stacklevel + 1)
