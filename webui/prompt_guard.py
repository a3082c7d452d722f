"""Refuse `<lora:...>` / `<hypernet:...>` tags that would make the server read a file outside its folders, or that are
malformed.

The pipelines resolve a LoRA tag as a name in the library *or* as a file path, which is right
for a local user but not for a network client: `<lora:../../etc/passwd:1>` must never open a
file. Over the network a tag may only name an entry the library lists.
"""

from __future__ import annotations

import re

EXTRA_NETWORK_TAG = re.compile(r"<(lora|lyco|hypernet):([^:>]*)(?::[^>]*)?>", re.IGNORECASE)


def extra_network_names(prompt: str) -> list[tuple[str, str]]:
    """(kind, name) of every `<kind:name[:weights]>` tag in a prompt."""
    return [(m.group(1).lower(), m.group(2).strip()) for m in EXTRA_NETWORK_TAG.finditer(prompt)]


def check_prompt_networks(field: str, prompt: str, lora_names: set[str] | None) -> None:
    """Raise ValueError unless every LoRA tag names an entry of the library (`lora_names`). `<hypernet:...>` tags are
    `check_hypernetwork_tags`'s."""
    for kind, name in extra_network_names(prompt):
        if kind == "hypernet":
            continue
        if lora_names is None:
            raise ValueError(f"{field}: <{kind}:{name}> needs a LoRA folder, and this server has none (start it with --lora-dir).")
        if name not in lora_names:
            shown = ", ".join(sorted(lora_names)[:10]) or "(none)"
            raise ValueError(f"{field}: no LoRA named {name!r} in the server's LoRA folder; available: {shown}. "
                             "Tags name a LoRA from GET /sdapi/v1/loras, never a file path.")


def check_hypernetwork_tags(field: str, prompt: str, library) -> None:
    """With a hypernetwork folder (`library`, a `HypernetworkLibrary`; None: tags skipped with a warning by the
    pipeline), refuse a malformed `<hypernet:...>` tag or one naming no file of it now, not in the queue. Names
    resolve in the folder only, never as paths."""
    if library is None:
        return
    from mixkit.hypernetworks import parse_hypernetwork_tags

    try:
        for request in parse_hypernetwork_tags(prompt):
            library.resolve(request.name)
    except (ValueError, FileNotFoundError) as error:
        raise ValueError(f"{field}: {error} Tags name a hypernetwork from GET /sdapi/v1/hypernetworks.") from None


def check_tag_syntax(field: str, prompt: str) -> None:
    """Refuse a malformed extra-network tag (`<lora:style:abc>`) now, with the pipeline's own parser and message,
    rather than as a job that fails in the queue after the wait."""
    from mixkit.prompts import extract_extra_networks

    try:
        extract_extra_networks(prompt)
    except ValueError as error:
        raise ValueError(f"{field}: {error}; write weights as numbers, e.g. <lora:name:0.8>.") from None
