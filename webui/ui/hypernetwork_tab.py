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
from webui.ui.prompt_targets import TARGETS, insert_into

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
    items, names = hypernetwork_cards(library)
    card_names = gr.State(names)
    target = gr.Radio(list(TARGETS), value=TARGETS[0], label="Add to", elem_id="hypernetwork_target")
    cards = gr.Gallery(items, label="Hypernetworks (click a card to add <hypernet:name:1> to the chosen prompt, again "
                                    "to remove it; preview: NAME.png / NAME.preview.png next to the file)",
                       columns=6, height="auto", allow_preview=False, interactive=False, format="png",
                       elem_id="hypernetwork_cards")
    refresh = gr.Button("Refresh", elem_id="hypernetwork_refresh")

    def pick(chosen: str, shown: list[str], txt_prompt: str, txt_negative: str, img_prompt: str, img_negative: str,
             event: gr.SelectData):  # Gradio passes the click as the parameter annotated gr.SelectData
        prompts = [txt_prompt, txt_negative, img_prompt, img_negative]
        if event.index is None or not 0 <= event.index < len(shown):
            return prompts
        name = shown[event.index]
        return insert_into(chosen, name, prompts, toggle_hypernet_tag)

    def do_refresh():
        return hypernetwork_cards(library)

    cards.select(pick, inputs=[target, card_names, *boxes], outputs=boxes, queue=False)
    refresh.click(do_refresh, outputs=[cards, card_names])
