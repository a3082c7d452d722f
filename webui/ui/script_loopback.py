"""Loopback's controls under img2img's Script dropdown, as A1111's: Loops and Final denoising strength sliders, the
Denoising strength curve and "Append interrogated prompt at each iteration" dropdowns. Their values are A1111's four
`script_args`, checked by the script (`pipelines.scripts.loopback_config`) as an API request's are.

"DeepBooru" is offered, as in A1111, and refused with the reason when Generate is pressed (mixkit has no DeepBooru
tagger yet); "CLIP" uses this server's Interrogate CLIP.
"""

from __future__ import annotations

import gradio as gr

from pipelines.scripts.loopback_config import ARG_DEFAULTS, CURVES, INTERROGATIONS, MAX_LOOPS, TITLE
from webui.ui.script_controls import ScriptUi, register_script_ui


def build_loopback_controls(kind: str, state):
    loops, final, curve, interrogation = ARG_DEFAULTS
    components = [
        gr.Slider(1, MAX_LOOPS, value=loops, step=1, label="Loops", elem_id=f"{kind}_loopback_loops"),
        gr.Slider(0, 1, value=final, step=0.01, label="Final denoising strength",
                  elem_id=f"{kind}_loopback_final_denoising_strength"),
        gr.Dropdown(list(CURVES), value=curve, label="Denoising strength curve", elem_id=f"{kind}_loopback_curve"),
        gr.Dropdown(list(INTERROGATIONS), value=interrogation, label="Append interrogated prompt at each iteration",
                    elem_id=f"{kind}_loopback_append_interrogation"),
    ]
    return components, loopback_script_args


def loopback_script_args(values: list) -> list:
    """The controls' values as A1111's script_args; the Loops slider's 4.0 as the whole number it stands for (a
    value that is not whole is left for the script to refuse)."""
    loops, *rest = values
    if isinstance(loops, float) and loops.is_integer():
        loops = int(loops)
    return [loops, *rest]


register_script_ui(ScriptUi(TITLE, build_loopback_controls))
