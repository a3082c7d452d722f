"""Settings > img2img colour correction: A1111's "Apply color correction to img2img results to match original
colors" checkbox, and its Settings > Saving "Save a copy of image before applying color correction to img2img
results".

Applied with its own button, as the face restoration settings are; the values are `/sdapi/v1/options`'
`img2img_color_correction` and `save_images_before_color_correction`, read by every img2img generation of the UI and by every API img2img request
(override_settings can change it per request); Loopback then matches every loop to its first init image
(`pipelines.color_correction`).
"""

from __future__ import annotations

import gradio as gr

from webui.options import BEFORE_COLOR_CORRECTION_KEY, COLOR_CORRECTION_KEY
from webui.server_state import ServerState


def build_color_correction_settings(state: ServerState, apply_settings) -> None:
    """The two checkboxes (A1111's labels) and their button."""
    enabled = gr.Checkbox(lambda: state.options.get(COLOR_CORRECTION_KEY), elem_id="settings_img2img_color_correction",
                          label="Apply color correction to img2img results to match original colors")
    before = gr.Checkbox(lambda: state.options.get(BEFORE_COLOR_CORRECTION_KEY),
                         elem_id="settings_save_images_before_color_correction",
                         label="Save a copy of image before applying color correction to img2img results")
    status = gr.Markdown()
    button = gr.Button("Apply color correction settings", elem_id="settings_apply_img2img_color_correction")
    button.click(lambda on, keep: apply_settings(state, {COLOR_CORRECTION_KEY: bool(on),
                                                         BEFORE_COLOR_CORRECTION_KEY: bool(keep)}),
                 inputs=[enabled, before], outputs=status)
