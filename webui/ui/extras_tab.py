"""Extras: upscale an image with a named upscaler, through the same queue and limits as the API.

The result carries the source's text chunks plus `postprocessing`, is saved to the output folder when
"Save generated images" is on (as A1111's Extras saves), and its postprocessing text is shown."""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState
from webui.ui.errors import failed, refused
from webui.ui.extras_output import POSTPROCESSING_KEY, extras_chunks, next_extras_path, save_extras_png
from webui.ui.form_components import form_slider
from webui.worker import QueueFullError


def build_extras_tab(state: ServerState):
    """Create the tab; returns its source image component (the target of the galleries' "Send to extras")."""
    from pipelines.upscale import UPSCALERS, UpscaleLimits

    with gr.Row():
        with gr.Column():
            source = gr.Image(label="Image", type="pil", image_mode="RGB", elem_id="extras_image")
            with gr.Row():
                upscaler = gr.Dropdown(UPSCALERS.names(), value=UPSCALERS.names()[0], label="Upscaler", elem_id="extras_upscaler")
                scale = form_slider(1, UpscaleLimits().max_scale, value=2, step=0.05, label="Scale by", elem_id="extras_scale")
            run = gr.Button("Upscale", variant="primary", elem_id="extras_generate")
        with gr.Column():
            result = gr.Image(label="Result", type="pil", format="png", interactive=False, elem_id="extras_result")
            size = gr.Markdown(elem_id="extras_size")
            info = gr.Textbox(label="Postprocessing", interactive=False, elem_id="extras_info")

    def upscale(image, name: str, factor: float, request: gr.Request):
        if image is None:
            raise refused("Drop an image to upscale first.")
        try:
            job = state.submit_upscale(image.convert("RGB"), float(factor), name,
                                       session=getattr(request, "session_hash", None))  # dropped if the tab closes
            upscaled = job.future.result()
        except (ValueError, TypeError, QueueFullError) as error:  # limits, bad name, queue full: tell the user
            raise refused(str(error)) from None
        except Exception as error:  # the upscaler failed: tell the user, keep the UI alive
            raise failed(str(error), error) from None
        chunks = extras_chunks(image, float(factor), name)
        if state.options.get("samples_save"):
            path = save_extras_png(upscaled, next_extras_path(state.output_dir), chunks)
        else:  # still a PNG with its chunks, so a download from the result keeps them
            import uuid
            from pathlib import Path

            path = save_extras_png(upscaled, Path(result.GRADIO_CACHE) / "mixkit-extras" / uuid.uuid4().hex / "00000.png",
                                   chunks)
        return (str(path), f"{image.width}x{image.height} -> {upscaled.width}x{upscaled.height}",
                chunks[POSTPROCESSING_KEY])

    run.click(upscale, inputs=[source, upscaler, scale], outputs=[result, size, info])
    return source
