"""SD upscale's controls under img2img's Script dropdown, as A1111's: its note, Tile overlap, Scale Factor and the
Upscaler radio (the server's `/sdapi/v1/upscalers` names; a refresh button beside it rescans the upscaler folders).
Their values become A1111's 4 `script_args`; the upscaler goes by name, which the script takes as well as an index."""

from __future__ import annotations

import gradio as gr

from pipelines.scripts.sd_upscale import (DEFAULT_OVERLAP, DEFAULT_SCALE, INFO, MAX_OVERLAP_SLIDER, MIN_SCALE,
                                          upscaler_choices)
from webui.ui.script_controls import ScriptUi, register_script_ui


def build_sd_upscale_controls(kind: str, state):
    from pipelines.upscale import UpscaleLimits
    from webui.api_selectable_scripts import script_context

    choices = upscaler_choices(**script_context(state))
    gr.HTML(f"<p style=\"margin-bottom:0.75em\">{INFO}</p>")
    overlap = gr.Slider(0, MAX_OVERLAP_SLIDER, value=DEFAULT_OVERLAP, step=16, label="Tile overlap",
                        elem_id=f"{kind}_sd_upscale_overlap")
    scale_factor = gr.Slider(MIN_SCALE, UpscaleLimits().max_scale, value=DEFAULT_SCALE, step=0.05,
                             label="Scale Factor", elem_id=f"{kind}_sd_upscale_scale_factor")
    with gr.Row():
        upscaler = gr.Radio(choices, value=choices[0], label="Upscaler", elem_id=f"{kind}_sd_upscale_upscaler_index")
        if state is not None:  # A1111 rescans on a UI reload; the button does it now (webui.ui.upscaler_refresh)
            from webui.ui.upscaler_refresh import add_upscaler_refresh

            add_upscaler_refresh(state, upscaler, lambda: upscaler_choices(**script_context(state)),
                                 elem_id=f"{kind}_sd_upscale_refresh_upscalers")
    return [overlap, upscaler, scale_factor], sd_upscale_script_args


def sd_upscale_script_args(values: list) -> list:
    """[overlap, upscaler, scale] as A1111's script_args [info, overlap, upscaler, scale_factor] (the slider's 64.0
    as 64)."""
    overlap, upscaler, scale = values
    return [INFO, int(overlap) if isinstance(overlap, float) and overlap.is_integer() else overlap, upscaler, scale]


register_script_ui(ScriptUi("SD upscale", build_sd_upscale_controls))
