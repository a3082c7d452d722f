"""Settings > Face restoration: A1111's "Restore faces" switch, restorer, CodeFormer weight, unload and
save-before options.

Applied with their own button, as the upscaling settings are; the values are `/sdapi/v1/options`' `face_restoration`,
`face_restoration_model`, `code_former_weight`, `face_restoration_unload` and `save_images_before_face_restoration`,
read by every UI generation and by every API request that does not set them (`pipelines.face_restoration`).
"""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState


def build_face_restoration_settings(state: ServerState, apply_settings) -> None:
    """The controls (A1111's: a checkbox, a radio of the restorers, a 0-1 slider, two checkboxes) and their button."""
    from pipelines.face_restoration import FACE_RESTORER_NAMES

    enabled = gr.Checkbox(lambda: state.options.get("face_restoration"), elem_id="settings_face_restoration",
                          label="Restore faces (txt2img and img2img; needs --codeformer-models-path or "
                                "--gfpgan-models-path)")
    model = gr.Radio(list(FACE_RESTORER_NAMES), value=lambda: state.options.get("face_restoration_model"),
                     label="Face restoration model", elem_id="settings_face_restoration_model")
    weight = gr.Slider(0, 1, value=lambda: state.options.get("code_former_weight"), step=0.01,
                       label="CodeFormer weight (0 = maximum effect; 1 = minimum effect)",
                       elem_id="settings_code_former_weight")
    unload = gr.Checkbox(lambda: state.options.get("face_restoration_unload"),
                         elem_id="settings_face_restoration_unload", label="Move face restoration model from VRAM into RAM after processing")
    before = gr.Checkbox(lambda: state.options.get("save_images_before_face_restoration"),
                         elem_id="settings_save_images_before_face_restoration",
                         label="Save a copy of image before doing face restoration")
    status = gr.Markdown()
    button = gr.Button("Apply face restoration settings", elem_id="settings_apply_face_restoration")
    button.click(lambda on, name, w, off, keep: apply_settings(state, face_restoration_changes(on, name, w, off, keep)),
                 inputs=[enabled, model, weight, unload, before], outputs=status)


def face_restoration_changes(enabled, model, weight, unload, before) -> dict:
    """The form's values as option changes (checked by `apply_settings`, as an API change is)."""
    return {"face_restoration": bool(enabled), "face_restoration_model": model, "code_former_weight": float(weight),
            "face_restoration_unload": bool(unload), "save_images_before_face_restoration": bool(before)}
