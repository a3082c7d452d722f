"""PNG Info: drop an image, read its A1111 infotext, send every field to txt2img or img2img."""

from __future__ import annotations

import gradio as gr
from webui.server_state import ServerState
from webui.ui.errors import refused
from webui.ui.generate_tab import GenerateTab, apply_form_values, form_outputs
from webui.ui.send_to import notes_markdown, paste_values


def read_upload_infotext(path: str, max_pixels: int) -> str:
    """The infotext of an uploaded file ("" if none); refuses images above `max_pixels` before decoding."""
    from pipelines.infotext_read import infotext_from_image

    return infotext_from_image(read_upload_image(path, max_pixels)) or ""


def read_upload_image(path: str, max_pixels: int):
    """The uploaded file as a loaded PIL image (text chunks included); refuses images above `max_pixels` before
    decoding, and files that are not images, with a ValueError saying which."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            if image.width * image.height > max_pixels:
                raise ValueError(f"The image is {image.width}x{image.height}, above the {max_pixels:,}-pixel limit; "
                                 "it is not read (it may be a decompression bomb).")
            image.load()  # text chunks after the pixel data are only seen once the image is read
            return image
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
            raise refused(str(error)) from None
        return text, ("" if text else "This image has no generation parameters.")

    upload.change(read, inputs=upload, outputs=[infotext, notes])

    for kind, button in buttons.items():
        tab = targets[kind]

        def send(text: str, path: str | None, tab=tab, kind=kind):
            if not text:
                raise refused("Drop an image with generation parameters first.")
            values, skipped = paste_values(state, tab, text, sampler_names, schedule_names)
            image = []
            if tab.init_image is not None:  # A1111 sends the picture along to img2img
                try:
                    image = [read_upload_image(path, state.limits.max_pixels * 4) if path else gr.skip()]
                except ValueError as error:
                    raise refused(str(error)) from None
            note = notes_markdown(skipped)
            return [*apply_form_values(tab, values), *image, gr.Tabs(selected=kind), note]

        init_image = [tab.init_image] if tab.init_image is not None else []
        button.click(send, inputs=[infotext, upload], outputs=[*form_outputs(tab), *init_image, tabs, notes], queue=False)
