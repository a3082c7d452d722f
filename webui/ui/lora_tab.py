"""LoRA browser: one card per file of the LoRA folder, with its preview image; clicking a card adds `<lora:name:1>`
to the txt2img or img2img prompt (or negative prompt) chosen under "Add to", or removes it when it is there.

Card images are thumbnails decoded on the server from the preview next to each LoRA file (see
`webui.lora_previews`), or a placeholder, so the browser never needs a file URL into the folder.
"""

from __future__ import annotations

import re
from pathlib import Path

import gradio as gr
from webui.lora_cards import LoraCard, lora_cards
from webui.lora_previews import load_thumbnail, placeholder_image
from webui.ui.prompt_targets import TARGETS, insert_into
from webui.server_state import ServerState


def add_tag(prompt: str, tag: str) -> str:
    """The prompt with `tag` appended (A1111 adds it after a comma-free space); unchanged if already there."""
    prompt = prompt or ""
    # An embedding name counts as present only as a whole word: "shinystyle2" in the prompt is not "shinystyle".
    present = tag in prompt if tag.startswith("<") else re.search(rf"(?<!\w){re.escape(tag)}(?!\w)", prompt)
    if present:
        return prompt
    return f"{prompt.rstrip()} {tag}".strip()


def toggle_lora_tag(prompt: str, name: str) -> str:
    """The prompt without its `<lora:name:...>` tags (whatever their weight) if it has one, else with `<lora:name:1>`.

    A1111's card click toggles the same way (extraNetworks.js `tryToRemoveExtraNetworkFromPrompt`: a tag of the
    same `lora:NAME` is removed, its weight ignored), so a second click never adds a duplicate at another weight."""
    prompt = prompt or ""
    same = re.compile(rf"\s*<lora:{re.escape(name)}:[^>]*>")
    if same.search(prompt):
        return same.sub("", prompt).strip()
    return f"{prompt.rstrip()} <lora:{name}:1>".strip()


def card_tag_name(library, card: LoraCard) -> str:
    """The name a card's tag uses: A1111's alias (`ss_output_name`, else the file stem) when it resolves to this
    very file here, else the stem, else the path relative to the folder (`sub/detail`), which always does.

    A1111 inserts the alias and falls back to the file name when the alias is ambiguous (`get_alias`), and never
    the sub-folder path (A1111 does not resolve `sub/detail`)."""
    own = (library.folder / card.relative_path).resolve()
    for candidate in (card.alias, Path(card.relative_path).stem):
        try:
            if candidate and library.resolve_name(candidate) == own:
                return candidate
        except (ValueError, OSError):
            continue  # another file has this name too, or none: try the next one
    return card.name


def card_caption(card: LoraCard) -> str:
    """The name, then base model, dimension and top training tags when the file's metadata has them."""
    details = [x for x in (card.base_model, f"dim {card.network_dim}" if card.network_dim else None) if x]
    if card.top_tags:
        details.append(", ".join(card.top_tags[:3]))
    return " | ".join([card.name, *details])


def card_items(library) -> tuple[list[tuple], list[str]]:
    """(gallery items [(image, caption)], tag names in the same order): a placeholder where there is no usable preview."""
    items, names = [], []
    for card in lora_cards(library):
        image = load_thumbnail(card.preview) if card.preview else None
        items.append((image if image is not None else placeholder_image(card.name), card_caption(card)))
        names.append(card_tag_name(library, card))
    return items, names


def build_lora_tab(state: ServerState, boxes: list) -> None:
    """`boxes`: the prompt Textboxes in `webui.ui.prompt_targets.TARGETS` order."""
    if state.lora_library is None:
        gr.Markdown("No LoRA folder configured: start the server with `--lora-dir FOLDER`.")
        return
    items, names = card_items(state.lora_library)
    card_names = gr.State(names)
    target = gr.Radio(list(TARGETS), value=TARGETS[0], label="Add to", elem_id="lora_target")
    cards = gr.Gallery(items, label="LoRA (click a card to add it to the chosen prompt, again to remove it; preview: "
                                    "NAME.png / NAME.preview.png next to the file)",
                       columns=6, height="auto", allow_preview=False, interactive=False, format="png",
                       elem_id="lora_cards")
    refresh = gr.Button("Refresh", elem_id="lora_refresh")

    def pick(chosen: str, shown: list[str], txt_prompt: str, txt_negative: str, img_prompt: str, img_negative: str,
             event: gr.SelectData):  # Gradio passes the click as the parameter annotated gr.SelectData
        prompts = [txt_prompt, txt_negative, img_prompt, img_negative]
        if event.index is None or not 0 <= event.index < len(shown):
            return prompts
        return insert_into(chosen, shown[event.index], prompts, toggle_lora_tag)

    def do_refresh():
        state.lora_library.refresh()
        new_items, new_names = card_items(state.lora_library)
        return new_items, new_names

    cards.select(pick, inputs=[target, card_names, *boxes], outputs=boxes, queue=False)
    refresh.click(do_refresh, outputs=[cards, card_names])
