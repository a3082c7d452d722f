"""PNG Info: drop an image, read its A1111 infotext, send every field to txt2img or img2img."""

from __future__ import annotations

import gradio as gr
from webui.server_state import ServerState
from webui.ui.generate_tab import GenerateTab, apply_form_values, form_outputs
from webui.ui.paste_infotext import infotext_to_form_values


def read_upload_infotext(path: str, max_pixels: int) -> str:
    """The infotext of an uploaded file ("" if none); refuses images above `max_pixels` before decoding."""
    from PIL import Image, UnidentifiedImageError

    from pipelines.infotext_read import infotext_from_image

    try:
        with Image.open(path) as image:
            if image.width * image.height > max_pixels:
                raise ValueError(f"The image is {image.width}x{image.height}, above the {max_pixels:,}-pixel limit; "
                                 "it is not read (it may be a decompression bomb).")
            image.load()  # text chunks after the pixel data are only seen once the image is read
            return infotext_from_image(image) or ""
    except (UnidentifiedImageError, Image.DecompressionBombError):
        raise ValueError("The file is not an image Pillow can read (PNG, JPEG, WebP...) or is too large.") from None
    except (OSError, SyntaxError) as error:
        raise ValueError(f"The image is damaged or truncated: {error}") from None


def build_png_info_tab(state: ServerState, tabs, targets: dict[str, GenerateTab], sampler_names: list[str],
                       schedule_names: list[str]) -> None:
    with gr.Row():
        with gr.Column():
            upload = gr.File(label="Drop an image", file_types=["image"], type="filepath", elem_id="pnginfo_image")
            with gr.Row():
                buttons = {kind: gr.Button(f"Send to {kind}", elem_id=f"pnginfo_send_to_{kind}") for kind in targets}
        with gr.Column():
            infotext = gr.Textbox(label="Parameters", lines=8, interactive=False, elem_id="pnginfo_infotext")
            notes = gr.Markdown(elem_id="pnginfo_notes")

    def read(path):
        if not path:
            return "", ""
        try:
            text = read_upload_infotext(path, state.limits.max_pixels * 4)
        except ValueError as error:
            raise gr.Error(str(error)) from None
        return text, ("" if text else "This image has no generation parameters.")

    upload.change(read, inputs=upload, outputs=[infotext, notes])

    for kind, button in buttons.items():
        tab = targets[kind]

        def send(text: str, tab=tab, kind=kind):
            if not text:
                raise gr.Error("Drop an image with generation parameters first.")
            values, skipped = infotext_to_form_values(text, state.limits, sampler_names, schedule_names,
                                                      current_model=state.model_title)
            note = "\n".join(f"- {n}" for n in skipped)
            return [*apply_form_values(tab, values), gr.Tabs(selected=kind), note]

        button.click(send, inputs=infotext, outputs=[*form_outputs(tab), tabs, notes], queue=False)
