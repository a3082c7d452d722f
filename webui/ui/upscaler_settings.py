"""Settings > Upscaling: A1111's tile size and overlap for model (ESRGAN / Real-ESRGAN / SRVGG) upscalers.

Applied with their own button, as the sampler parameters are, so the Settings tab's main form keeps its inputs; the
values are `/sdapi/v1/options`' `ESRGAN_tile` / `ESRGAN_tile_overlap` and retile every registered model upscaler.
"""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState


def build_upscaler_settings(state: ServerState, apply_settings) -> None:
    """The two sliders (A1111's ranges: 0-512 step 16, 0-48) and their Apply button."""
    with gr.Row():
        tile = gr.Slider(0, 512, value=lambda: state.options.get("ESRGAN_tile"), step=16, elem_id="settings_ESRGAN_tile",
                         label="Tile size for ESRGAN upscalers (input pixels; 0 = no tiling)")
        overlap = gr.Slider(0, 48, value=lambda: state.options.get("ESRGAN_tile_overlap"), step=1,
                            elem_id="settings_ESRGAN_tile_overlap",
                            label="Tile overlap for ESRGAN upscalers (pixels; low values make a seam visible)")
    status = gr.Markdown()
    button = gr.Button("Apply upscaling settings", elem_id="settings_apply_upscaling")
    button.click(lambda size, over: apply_settings(state, {"ESRGAN_tile": int(size), "ESRGAN_tile_overlap": int(over)}),
                 inputs=[tile, overlap], outputs=status)
