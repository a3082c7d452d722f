"""The gallery of extra-network cards the LoRA and Hypernetworks tabs show: "Add to" (which prompt box a click
edits), the cards with their names, and Refresh.

A1111 shows such cards under each generation tab; here one tab per network kind serves both generation tabs, so a
click names its prompt box by `webui.ui.prompt_targets.TARGETS`. What a click writes is the kind's own (`click`).
"""

from __future__ import annotations

from typing import Callable

import gradio as gr
from webui.ui.prompt_targets import TARGETS

# (gallery items [(image, caption)], the names a click passes, in the same order)
Cards = tuple[list[tuple], list[str]]


def build_card_gallery(kind: str, label: str, boxes: list, list_cards: Callable[[], Cards],
                       click: Callable[[str, str, list[str]], list[str]],
                       before_refresh: Callable[[], None] | None = None) -> None:
    """Cards from `list_cards()`; a click on one returns `click(target, name, prompts)` into `boxes` (the prompt
    Textboxes in TARGETS order). Refresh runs `before_refresh` (re-reading the folder) and lists the cards again.
    Elem ids: `{kind}_target`, `{kind}_cards`, `{kind}_refresh`."""
    items, names = list_cards()
    card_names = gr.State(names)
    target = gr.Radio(list(TARGETS), value=TARGETS[0], label="Add to", elem_id=f"{kind}_target")
    cards = gr.Gallery(items, label=label, columns=6, height="auto", allow_preview=False, interactive=False,
                       format="png", elem_id=f"{kind}_cards")
    refresh = gr.Button("Refresh", elem_id=f"{kind}_refresh")

    def pick(chosen: str, shown: list[str], txt_prompt: str, txt_negative: str, img_prompt: str, img_negative: str,
             event: gr.SelectData):  # Gradio passes the click as the parameter annotated gr.SelectData
        prompts = [txt_prompt, txt_negative, img_prompt, img_negative]
        if event.index is None or not 0 <= event.index < len(shown):
            return prompts  # a stale page's click past the cards it shows
        return click(chosen, shown[event.index], prompts)

    def do_refresh():
        if before_refresh is not None:
            before_refresh()
        return list_cards()

    cards.select(pick, inputs=[target, card_names, *boxes], outputs=boxes, queue=False)
    refresh.click(do_refresh, outputs=[cards, card_names])
