"""Extras: upscale an image with a named upscaler, through the same queue and limits as the API."""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState
from webui.ui.errors import failed, refused
from webui.worker import QueueFullError


def build_extras_tab(state: ServerState) -> None:
    from pipelines.upscale import UPSCALERS, UpscaleLimits

    with gr.Row():
        with gr.Column():
            source = gr.Image(label="Image", type="pil", image_mode="RGB", elem_id="extras_image")
            with gr.Row():
                upscaler = gr.Dropdown(UPSCALERS.names(), value=UPSCALERS.names()[0], label="Upscaler", elem_id="extras_upscaler")
                scale = gr.Slider(1, UpscaleLimits().max_scale, value=2, step=0.05, label="Scale by", elem_id="extras_scale")
            run = gr.Button("Upscale", variant="primary", elem_id="extras_generate")
        with gr.Column():
            result = gr.Image(label="Result", type="pil", format="png", interactive=False, elem_id="extras_result")
            size = gr.Markdown(elem_id="extras_size")

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
        return upscaled, f"{image.width}x{image.height} -> {upscaled.width}x{upscaled.height}"

    run.click(upscale, inputs=[source, upscaler, scale], outputs=[result, size])
