"""The img2img tab's "Interrogate CLIP" button: the editor's image described into the prompt box, as A1111's.

It runs `webui.interrogation` (caption + CLIP-ranked terms, Settings > Interrogate) through the same queue as
`POST /sdapi/v1/interrogate`, so the UI and the API give the same text for the same image.
"""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState
from webui.ui.errors import failed, refused


def interrogate_editor_image(state: ServerState, editor_value) -> str:
    """The interrogation of the editor's image (its background: the picture without the painted mask)."""
    from pipelines.image_prep import normalize_init_image
    from webui.interrogation import submit_interrogation
    from webui.worker import QueueFullError

    if not editor_value or editor_value.get("background") is None:
        raise refused("Drop an image into the img2img editor first, then press Interrogate CLIP.")
    image = normalize_init_image(editor_value["background"])  # transparency on white, as img2img reads it
    try:
        job = submit_interrogation(state, image)
    except (QueueFullError, ValueError) as error:
        raise refused(str(error)) from None
    try:
        return job.future.result()
    except (OSError, RuntimeError, TypeError, ValueError) as error:
        raise failed(f"Interrogate CLIP could not run: {error}", error) from None


def build_interrogate_button(state: ServerState, editor, prompt) -> gr.Button:
    """The button (A1111's elem_id "interrogate"), writing its answer into `prompt`."""
    button = gr.Button("Interrogate CLIP", elem_id="interrogate", size="sm")
    button.click(lambda value: interrogate_editor_image(state, value), inputs=[editor], outputs=[prompt])
    return button
