"""Prompt matrix's controls under the Script dropdown, as A1111's: "Put variable parts at start of prompt", "Use
different seed for each picture", "Select prompt" (positive / negative), "Select joining char" (comma / space) and
"Grid margins (px)". Their values are A1111's five `script_args`, checked by `pipelines.scripts.prompt_matrix`."""

from __future__ import annotations

import gradio as gr

from pipelines.scripts.prompt_matrix import DELIMITERS, PROMPT_TYPES, TITLE
from pipelines.scripts.script_args import MAX_MARGIN
from webui.ui.script_controls import ScriptUi, register_script_ui


def build_prompt_matrix_controls(kind: str, state):
    with gr.Row():
        with gr.Column():
            put_at_start = gr.Checkbox(False, label="Put variable parts at start of prompt",
                                       elem_id=f"{kind}_prompt_matrix_put_at_start")
            different_seeds = gr.Checkbox(False, label="Use different seed for each picture",
                                          elem_id=f"{kind}_prompt_matrix_different_seeds")
        with gr.Column():
            prompt_type = gr.Radio(list(PROMPT_TYPES), value="positive", label="Select prompt",
                                   elem_id=f"{kind}_prompt_matrix_prompt_type")
            delimiter = gr.Radio(list(DELIMITERS), value="comma", label="Select joining char",
                                 elem_id=f"{kind}_prompt_matrix_variations_delimiter")
        with gr.Column():
            margin_size = gr.Slider(0, MAX_MARGIN, value=0, step=2, label="Grid margins (px)",
                                    elem_id=f"{kind}_prompt_matrix_margin_size")
    return [put_at_start, different_seeds, prompt_type, delimiter, margin_size], prompt_matrix_script_args


def prompt_matrix_script_args(values: list) -> list:
    """The controls' values as A1111's script_args (built in its order); the slider's 12.0 as 12."""
    args = list(values)
    args[4] = int(args[4] or 0)
    return args


register_script_ui(ScriptUi(TITLE, build_prompt_matrix_controls))
