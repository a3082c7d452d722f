"""Embeddings browser: one row per file of `--embeddings-dir`; clicking a row adds its name to the prompt chosen
under "Add to" (txt2img or img2img, prompt or negative prompt), and a second click takes it out again.

A1111 triggers an embedding by its bare name in the prompt (no tag syntax), so the name is
what gets inserted, and its card click toggles (extraNetworks.js `tryToRemoveExtraNetworkFromPrompt`).

The rows are written into each page served (`webui.ui.page_values.serve_props`): an embedding created in the Train
tab, or copied into the folder, is listed by the next page opened, as A1111 rebuilds its cards when it serves a page.
"""

from __future__ import annotations

import re

import gradio as gr
from webui.embedding_list import embeddings_response
from webui.server_state import ServerState
from webui.ui.page_values import serve_props
from webui.ui.prompt_targets import TARGETS, insert_into

ROWS_LABEL = "Textual inversion embeddings (click to add to the chosen prompt, again to remove it)"


def embedding_listing(state: ServerState) -> dict[str, dict[str, dict]]:
    """`/sdapi/v1/embeddings`' answer for the loaded model, after re-reading the folder."""
    state.refresh_embeddings()
    model = state.holder.loaded_model()
    return embeddings_response(state.embedding_library, model)


def embedding_rows(state: ServerState, listing: dict | None = None) -> list[list[str]]:
    """[name, "N vectors", "dim D"] per embedding the loaded model can use (as `/sdapi/v1/embeddings`' loaded), sorted
    by name; from `listing` (an `embedding_listing`) when the caller has one, else read now."""
    loaded = (listing if listing is not None else embedding_listing(state))["loaded"]
    return [[name, f"{info['vectors']} vectors", f"dim {info['shape']}"] for name, info in loaded.items()]


def rows_label(listing: dict) -> str:
    """The table's label; it names the files left out for another model, so an empty table is not a mystery."""
    skipped = sorted(listing["skipped"])
    if not skipped:
        return ROWS_LABEL
    return f"{ROWS_LABEL}; made for another model than the loaded one, so not listed: {', '.join(skipped)}"


def served_rows_props(state: ServerState) -> dict:
    """The table's rows and label for a page served now, in Gradio's config form (a Textbox example is its text)."""
    listing = embedding_listing(state)
    return {"samples": embedding_rows(state, listing), "label": rows_label(listing)}


def toggle_embedding(prompt: str, name: str) -> str:
    """The prompt without `name` (each whole-word occurrence, with the space before it) when it holds it, else with
    `name` appended after a space. A whole word only: "shinystyle2" is not "shinystyle", and is left alone."""
    prompt = prompt or ""
    word = re.compile(rf"\s*(?<![\w-]){re.escape(name)}(?![\w-])")
    if word.search(prompt):
        return word.sub("", prompt).strip()
    return f"{prompt.rstrip()} {name}".strip()


def build_embeddings_tab(state: ServerState, boxes: list) -> None:
    """`boxes`: the prompt Textboxes in `webui.ui.prompt_targets.TARGETS` order."""
    if state.embedding_library is None:
        gr.Markdown("No embeddings folder configured: start the server with `--embeddings-dir FOLDER`.")
        return
    target = gr.Radio(list(TARGETS), value=TARGETS[0], label="Add to", elem_id="embedding_target")
    listing = embedding_listing(state)
    rows = gr.Dataset(components=[gr.Textbox(visible=False), gr.Textbox(visible=False), gr.Textbox(visible=False)],
                      headers=["Embedding", "Vectors", "Width"], samples=embedding_rows(state, listing),
                      label=rows_label(listing), elem_id="embedding_cards", samples_per_page=24)
    serve_props(rows, lambda: served_rows_props(state))
    refresh = gr.Button("Refresh", elem_id="embedding_refresh")

    def pick(chosen: str, txt_prompt: str, txt_negative: str, img_prompt: str, img_negative: str,
             event: gr.SelectData):
        name = event.value[0] if isinstance(event.value, list) else event.value
        return insert_into(chosen, name, [txt_prompt, txt_negative, img_prompt, img_negative], toggle_embedding)

    def do_refresh():
        fresh = embedding_listing(state)
        return gr.Dataset(samples=embedding_rows(state, fresh), label=rows_label(fresh))

    rows.select(pick, inputs=[target, *boxes], outputs=boxes, queue=False)
    refresh.click(do_refresh, outputs=rows)
