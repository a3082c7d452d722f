"""LoRA browser: one card per file of the LoRA folder, with its preview image; clicking a card adds `<lora:name:1>`
to the txt2img or img2img prompt (or negative prompt) chosen under "Add to".

Card images are thumbnails decoded on the server from the preview next to each LoRA file (see
`webui.lora_previews`), or a placeholder, so the browser never needs a file URL into the folder.
"""

from __future__ import annotations

import re

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


def card_caption(card: LoraCard) -> str:
    """The name, then base model, dimension and top training tags when the file's metadata has them."""
    details = [x for x in (card.base_model, f"dim {card.network_dim}" if card.network_dim else None) if x]
    if card.top_tags:
        details.append(", ".join(card.top_tags[:3]))
    return " | ".join([card.name, *details])


def card_items(library) -> tuple[list[tuple], list[str]]:
    """(gallery items [(image, caption)], names in the same order): a placeholder where there is no usable preview."""
    items, names = [], []
    for card in lora_cards(library):
        image = load_thumbnail(card.preview) if card.preview else None
        items.append((image if image is not None else placeholder_image(card.name), card_caption(card)))
        names.append(card.name)
    return items, names


def build_lora_tab(state: ServerState, boxes: list) -> None:
    """`boxes`: the prompt Textboxes in `webui.ui.prompt_targets.TARGETS` order."""
    if state.lora_library is None:
        gr.Markdown("No LoRA folder configured: start the server with `--lora-dir FOLDER`.")
        return
    items, names = card_items(state.lora_library)
    card_names = gr.State(names)
    target = gr.Radio(list(TARGETS), value=TARGETS[0], label="Add to", elem_id="lora_target")
    cards = gr.Gallery(items, label="LoRA (click a card to add it to the chosen prompt; preview: NAME.png / "
                                    "NAME.preview.png next to the file)",
                       columns=6, height="auto", allow_preview=False, interactive=False, format="png",
                       elem_id="lora_cards")
    refresh = gr.Button("Refresh", elem_id="lora_refresh")

    def pick(chosen: str, shown: list[str], txt_prompt: str, txt_negative: str, img_prompt: str, img_negative: str,
             event: gr.SelectData):  # Gradio passes the click as the parameter annotated gr.SelectData
        prompts = [txt_prompt, txt_negative, img_prompt, img_negative]
        if event.index is None or not 0 <= event.index < len(shown):
            return prompts
        return insert_into(chosen, f"<lora:{shown[event.index]}:1>", prompts, add_tag)

    def do_refresh():
        state.lora_library.refresh()
        new_items, new_names = card_items(state.lora_library)
        return new_items, new_names

    cards.select(pick, inputs=[target, card_names, *boxes], outputs=boxes, queue=False)
    refresh.click(do_refresh, outputs=[cards, card_names])
