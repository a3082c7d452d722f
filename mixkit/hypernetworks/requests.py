"""`<hypernet:name:strength>` prompt tags: parsed, and resolved to loaded hypernetworks at their strengths.

A1111 v1.10's `ExtraNetworkHypernet.activate`: the first positional field is the name, the second the multiplier
(1.0 when absent, `float()` of the text otherwise); named `key=value` fields are not read. Only the prompt's tags
apply (the negative prompt's stay text), and only the batch's first prompt's, as for LoRAs.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from mixkit.hypernetworks.apply import HypernetworkApplication, check_hypernetwork_strength

HYPERNET_KIND = "hypernet"  # case-sensitive, as A1111's extra network kinds


@dataclass(frozen=True)
class HypernetworkRequest:
    """One `<hypernet:...>` tag: the name (a file stem of the hypernetworks folder) and strength."""

    name: str
    strength: float
    raw: str  # the tag as written


def parse_hypernetwork_tags(prompt: str) -> list[HypernetworkRequest]:
    """The `<hypernet:...>` tags of `prompt`, in order. A tag without a name or with a strength that is not a finite
    number (or beyond the bounds) is a ValueError naming it, where A1111 would fail the whole generation too."""
    from mixkit.prompts.extra_networks import find_extra_network_tags

    requests = []
    for raw in find_extra_network_tags(prompt):
        kind, _, body = raw[1:-1].partition(":")
        if kind != HYPERNET_KIND or not body:
            continue
        positional = [item for item in body.split(":") if "=" not in item]
        name = positional[0].strip() if positional else ""
        if not name:
            raise ValueError(f"hypernetwork tag {raw!r} has no name; write it as <hypernet:name:strength>")
        strength = 1.0
        if len(positional) > 1:
            try:
                strength = float(positional[1])
            except ValueError:
                raise ValueError(f"hypernetwork tag {raw!r}: strength must be a number, "
                                 f"got {positional[1]!r}") from None
        check_hypernetwork_strength(strength, name)
        requests.append(HypernetworkRequest(name=name, strength=strength, raw=raw))
    return requests


def resolve_hypernetwork_requests(requests: list[HypernetworkRequest], library) -> list[HypernetworkApplication]:
    """Each request's hypernetwork loaded from `library` (a `HypernetworkLibrary`), in prompt order.

    A name mentioned twice is applied once per mention at its last mention's strength: A1111 keeps one loaded
    network per name and sets its multiplier per mention, so the last one wins (with a warning when they differ).
    """
    last = {request.name: request.strength for request in requests}
    differing = sorted({r.name for r in requests if r.strength != last[r.name]})
    if differing:
        warnings.warn(f"hypernetwork {', '.join(differing)} is named more than once with different strengths; as in "
                      "A1111, every mention applies it at the strength of the last one.", UserWarning, stacklevel=3)
    loaded = {name: library.load(name) for name in last}
    return [HypernetworkApplication(loaded[request.name], last[request.name]) for request in requests]
