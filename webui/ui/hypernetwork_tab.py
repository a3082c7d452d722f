"""Hypernetworks browser: one card per `.pt` file of `--hypernetwork-dir`; clicking a card adds
`<hypernet:name:1>` to the prompt chosen under "Add to", or removes the card's tag (whatever its strength) when it
is there, as A1111's extra-network card toggles (`tryToRemoveExtraNetworkFromPrompt`). Its preview is `NAME.png` /
`NAME.preview.png` next to the file, as for LoRA cards, else a placeholder.
"""

from __future__ import annotations

import re

import gradio as gr
from webui.lora_previews import find_preview, load_thumbnail, placeholder_image
from webui.server_state import ServerState
from webui.ui.card_gallery import build_card_gallery
from webui.ui.prompt_targets import insert_into

# A1111's extra_networks_default_multiplier: the strength a card inserts
CARD_STRENGTH = 1


def toggle_hypernet_tag(prompt: str, name: str) -> str:
    """The prompt without its `<hypernet:name:...>` tags if it has one, else with `<hypernet:name:1>` appended."""
    prompt = prompt or ""
    same = re.compile(rf"\s*<hypernet:{re.escape(name)}(?::[^>]*)?>")
    if same.search(prompt):
        return same.sub("", prompt).strip()
    return f"{prompt.rstrip()} <hypernet:{name}:{CARD_STRENGTH}>".strip()


def hypernetwork_cards(library) -> tuple[list[tuple], list[str]]:
    """(gallery items [(image, caption)], names in the same order), A1111's listing order."""
    items, names = [], []
    for entry in library.entries():
        preview = find_preview(entry.path, library.folder)
        image = load_thumbnail(preview) if preview else None
        items.append((image if image is not None else placeholder_image(entry.name), entry.name))
        names.append(entry.name)
    return items, names


def build_hypernetwork_tab(state: ServerState, boxes: list) -> None:
    """`boxes`: the prompt Textboxes in `webui.ui.prompt_targets.TARGETS` order."""
    library = state.hypernetwork_library
    if library is None:
        gr.Markdown("No hypernetwork folder configured: start the server with `--hypernetwork-dir FOLDER` "
                    "(A1111's models/hypernetworks).")
        return
    build_card_gallery(
        "hypernetwork", "Hypernetworks (click a card to add <hypernet:name:1> to the chosen prompt, again to remove "
        "it; preview: NAME.png / NAME.preview.png next to the file)", boxes, lambda: hypernetwork_cards(library),
        lambda target, name, prompts: insert_into(target, name, prompts, toggle_hypernet_tag))
