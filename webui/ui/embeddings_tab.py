"""Embeddings browser: one row per file of `--embeddings-dir`; clicking a row adds its name to the prompt chosen
under "Add to" (txt2img or img2img, prompt or negative prompt).

A1111 triggers an embedding by its bare name in the prompt (no tag syntax), so the name is
what gets inserted.
"""

from __future__ import annotations

import gradio as gr
from webui.embedding_list import embeddings_response
from webui.server_state import ServerState
from webui.ui.lora_tab import add_tag
from webui.ui.prompt_targets import TARGETS, insert_into


def embedding_rows(state: ServerState) -> list[list[str]]:
    """[name, "N vectors", "dim D"] per embedding the loaded model can use (as `/sdapi/v1/embeddings`' loaded), sorted
    by name."""
    model = state.holder.txt2img().model if state.holder.loaded else None
    loaded = embeddings_response(state.embedding_library, model)["loaded"]
    return [[name, f"{info['vectors']} vectors", f"dim {info['shape']}"] for name, info in loaded.items()]


def build_embeddings_tab(state: ServerState, boxes: list) -> None:
    """`boxes`: the prompt Textboxes in `webui.ui.prompt_targets.TARGETS` order."""
    if state.embedding_library is None:
        gr.Markdown("No embeddings folder configured: start the server with `--embeddings-dir FOLDER`.")
        return
    target = gr.Radio(list(TARGETS), value=TARGETS[0], label="Add to", elem_id="embedding_target")
    rows = gr.Dataset(components=[gr.Textbox(visible=False), gr.Textbox(visible=False), gr.Textbox(visible=False)],
                      headers=["Embedding", "Vectors", "Width"], samples=embedding_rows(state),
                      label="Textual inversion embeddings (click to add to the chosen prompt)",
                      elem_id="embedding_cards", samples_per_page=24)
    refresh = gr.Button("Refresh", elem_id="embedding_refresh")

    def pick(chosen: str, txt_prompt: str, txt_negative: str, img_prompt: str, img_negative: str,
             event: gr.SelectData):
        name = event.value[0] if isinstance(event.value, list) else event.value
        return insert_into(chosen, name, [txt_prompt, txt_negative, img_prompt, img_negative], add_tag)

    def do_refresh():
        state.refresh_embeddings()
        return gr.Dataset(samples=embedding_rows(state))

    rows.select(pick, inputs=[target, *boxes], outputs=boxes, queue=False)
    refresh.click(do_refresh, outputs=rows)
