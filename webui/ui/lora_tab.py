"""LoRA browser: one card per file of the LoRA folder; clicking a card adds `<lora:name:1>` to the prompt."""

from __future__ import annotations

import gradio as gr
from webui.lora_cards import lora_cards
from webui.server_state import ServerState


def add_tag(prompt: str, tag: str) -> str:
    """The prompt with `tag` appended (A1111 adds it after a comma-free space); unchanged if already there."""
    prompt = prompt or ""
    if tag in prompt:
        return prompt
    return f"{prompt.rstrip()} {tag}".strip()


def build_lora_tab(state: ServerState, prompt_box) -> None:
    if state.lora_library is None:
        gr.Markdown("No LoRA folder configured: start the server with `--lora-dir FOLDER`.")
        return

    def samples() -> list[list[str]]:
        rows = []
        for card in lora_cards(state.lora_library):
            details = ", ".join(x for x in (card.base_model, f"dim {card.network_dim}" if card.network_dim else None) if x)
            rows.append([card.name, details or "-", ", ".join(card.top_tags) or "-"])
        return rows

    cards = gr.Dataset(components=[gr.Textbox(visible=False), gr.Textbox(visible=False), gr.Textbox(visible=False)],
                       headers=["LoRA", "Base model", "Training tags"], samples=samples(), label="LoRA (click to add to the txt2img prompt)",
                       elem_id="lora_cards", samples_per_page=24)
    refresh = gr.Button("Refresh", elem_id="lora_refresh")

    def pick(prompt: str, event: gr.SelectData):
        name = event.value[0] if isinstance(event.value, list) else event.value
        return add_tag(prompt, f"<lora:{name}:1>")

    def do_refresh():
        state.lora_library.refresh()
        return gr.Dataset(samples=samples())

    cards.select(pick, inputs=prompt_box, outputs=prompt_box, queue=False)
    refresh.click(do_refresh, outputs=cards)
