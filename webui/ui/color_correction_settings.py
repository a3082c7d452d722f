"""Settings > img2img colour correction: A1111's "Apply color correction to img2img results to match original
colors" checkbox.

Applied with its own button, as the face restoration settings are; the value is `/sdapi/v1/options`'
`img2img_color_correction`, read by every img2img generation of the UI and by every API img2img request
(override_settings can change it per request); Loopback then matches every loop to its first init image
(`pipelines.color_correction`).
"""

from __future__ import annotations

import gradio as gr

from webui.options import COLOR_CORRECTION_KEY
from webui.server_state import ServerState


def build_color_correction_settings(state: ServerState, apply_settings) -> None:
    """The checkbox (A1111's label) and its button."""
    enabled = gr.Checkbox(lambda: state.options.get(COLOR_CORRECTION_KEY), elem_id="settings_img2img_color_correction",
                          label="Apply color correction to img2img results to match original colors")
    status = gr.Markdown()
    button = gr.Button("Apply color correction setting", elem_id="settings_apply_img2img_color_correction")
    button.click(lambda on: apply_settings(state, {COLOR_CORRECTION_KEY: bool(on)}), inputs=[enabled], outputs=status)
