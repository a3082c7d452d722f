"""PNG Info: drop an image, read its A1111 infotext and its other text chunks, send every field to txt2img,
img2img or inpaint, or the image itself to Extras."""

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


def other_text_items(image) -> dict[str, str]:
    """Every text item of the image but `parameters` (shown on its own): `postprocessing`, `extras`, a tool's own
    chunks... A1111's `run_pnginfo` lists each item `read_info_from_image` collects; the text items are the ones
    `/sdapi/v1/png-info` returns as `items` (`webui.base64_images.decode_base64_png_info`)."""
    return {key: value for key, value in image.info.items()
            if isinstance(key, str) and isinstance(value, str) and key != "parameters"}


def text_items_listing(items: dict[str, str]) -> str:
    """The items as "key:" followed by the value, one block each, for a read-only text box."""
    return "\n\n".join(f"{key}:\n{value}" for key, value in items.items())


# A1111's PNG Info: `create_buttons(["txt2img", "img2img", "inpaint", "extras"])`; inpaint is img2img's inpaint mode.
SEND_TARGETS = ("txt2img", "img2img", "inpaint", "extras")


def build_png_info_tab(state: ServerState, tabs, targets: dict[str, GenerateTab], sampler_names: list[str],
                       schedule_names: list[str], extras_image=None) -> None:
    """PNG Info's reader and Send buttons; `targets` holds the txt2img and img2img tabs, `extras_image` the Extras
    tab's source image (None: no "Send to extras")."""
    kinds = [kind for kind in SEND_TARGETS
             if (kind == "extras" and extras_image is not None) or ("img2img" if kind == "inpaint" else kind) in targets]
    with gr.Row():
        with gr.Column():
            upload = gr.File(label="Drop an image", file_types=["image"], type="filepath", elem_id="pnginfo_image")
            with gr.Row():
                buttons = {kind: gr.Button(f"Send to {kind}", elem_id=f"pnginfo_send_to_{kind}") for kind in kinds}
        with gr.Column():
            infotext = gr.Textbox(label="Parameters", lines=8, interactive=False, elem_id="pnginfo_infotext")
            items = gr.Textbox(label="Other text chunks", lines=4, interactive=False, elem_id="pnginfo_items")
            notes = gr.Markdown(elem_id="pnginfo_notes")

    def read(path):
        if not path:
            return "", "", ""
        try:
            image = read_upload_image(path, state.limits.max_pixels * 4)
        except ValueError as error:
            raise refused(str(error)) from None
        from pipelines.infotext_read import infotext_from_image

        text = infotext_from_image(image) or ""
        return text, text_items_listing(other_text_items(image)), ("" if text else "This image has no generation parameters.")

    upload.change(read, inputs=upload, outputs=[infotext, items, notes])

    def image_of(path: str | None):
        try:
            return read_upload_image(path, state.limits.max_pixels * 4) if path else gr.skip()
        except ValueError as error:
            raise refused(str(error)) from None

    if "extras" in buttons:
        def send_to_extras(path: str | None):
            if not path:
                raise refused("Drop an image first.")
            return image_of(path), gr.Tabs(selected="extras")  # the PNG itself, its text chunks included

        buttons["extras"].click(send_to_extras, inputs=upload, outputs=[extras_image, tabs], queue=False)

    for kind in (kind for kind in kinds if kind != "extras"):
        tab = targets["img2img" if kind == "inpaint" else kind]

        def send(text: str, path: str | None, tab=tab, kind=kind):
            if not text:
                raise refused("Drop an image with generation parameters first.")
            values, skipped = paste_values(state, tab, text, sampler_names, schedule_names)
            picture = [] if tab.init_image is None else [image_of(path), kind]  # A1111 sends the picture to img2img
            return [*apply_form_values(tab, values), *picture, gr.Tabs(selected=tab.kind), notes_markdown(skipped)]

        picture_outputs = [tab.init_image, tab.mode] if tab.init_image is not None else []
        buttons[kind].click(send, inputs=[infotext, upload], outputs=[*form_outputs(tab), *picture_outputs, tabs, notes],
                            queue=False)
