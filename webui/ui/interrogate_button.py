"""The img2img tab's "Interrogate CLIP" and "Interrogate DeepBooru" buttons: the editor's image described into the
prompt box, as A1111's.

They run `webui.interrogation` (caption + CLIP-ranked terms, or DeepBooru tags; Settings > Interrogate) through the
same queue as `POST /sdapi/v1/interrogate`, so the UI and the API give the same text for the same image.
"""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState
from webui.ui.errors import failed, refused

# interrogator -> (button label, A1111's elem_id)
INTERROGATORS = {"clip": ("Interrogate CLIP", "interrogate"), "deepbooru": ("Interrogate DeepBooru", "deepbooru")}


def interrogate_editor_image(state: ServerState, editor_value, interrogator: str = "clip") -> str:
    """The interrogation of the editor's image (its background: the picture without the painted mask)."""
    from pipelines.image_prep import normalize_init_image
    from webui.interrogation import DeepbooruUnavailableError, submit_deepbooru_interrogation, submit_interrogation
    from webui.worker import QueueFullError

    label = INTERROGATORS[interrogator][0]
    if not editor_value or editor_value.get("background") is None:
        raise refused(f"Drop an image into the img2img editor first, then press {label}.")
    image = normalize_init_image(editor_value["background"])  # transparency on white, as img2img reads it
    submit = submit_deepbooru_interrogation if interrogator == "deepbooru" else submit_interrogation
    try:
        job = submit(state, image)
    except (QueueFullError, ValueError, DeepbooruUnavailableError, FileNotFoundError) as error:
        raise refused(str(error)) from None
    try:
        return job.future.result()
    except (OSError, RuntimeError, TypeError, ValueError) as error:
        raise failed(f"{label} could not run: {error}", error) from None


def build_interrogate_button(state: ServerState, editor, prompt) -> tuple[gr.Button, gr.Button]:
    """The two buttons (A1111's elem_ids "interrogate" and "deepbooru"), each writing its answer into `prompt`."""
    buttons = []
    with gr.Row():
        for interrogator, (label, elem_id) in INTERROGATORS.items():
            button = gr.Button(label, elem_id=elem_id, size="sm")
            button.click(lambda value, interrogator=interrogator: interrogate_editor_image(state, value, interrogator),
                         inputs=[editor], outputs=[prompt])
            buttons.append(button)
    return buttons[0], buttons[1]
