"""Prompts from file or textbox's controls under the Script dropdown, as A1111's: "Iterate seed every line", "Use same
random seed for all lines", "Insert prompts at the" start / end, "List of prompt inputs" and a file upload that fills
that list, plus "Make a combined image containing all outputs". Their values are A1111's `script_args`, checked
(every line) by `pipelines.scripts.prompts_from_file`."""

from __future__ import annotations

import gradio as gr

from pipelines.scripts.prompts_from_file import POSITIONS, TITLE
from webui.ui.script_controls import ScriptUi, register_script_ui

MAX_FILE_BYTES = 1_000_000  # a prompt list is text; a megabyte is thousands of lines, more than one job may hold


def load_prompt_file(data: bytes | None) -> tuple:
    """An uploaded file's lines (each stripped, as A1111's) into the list, and the upload cleared; gr.Error for a file
    that is not UTF-8 text. No file (the upload cleared): the list stays as it is."""
    if data is None:
        return None, gr.update()
    if len(data) > MAX_FILE_BYTES:
        raise gr.Error(f"The prompt file is {len(data):,} bytes; the most is {MAX_FILE_BYTES:,}. Split it.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise gr.Error(f"The prompt file is not UTF-8 text (byte {error.start}); save it as UTF-8 and upload it "
                       "again.") from None
    return None, gr.update(value="\n".join(line.strip() for line in text.split("\n")), lines=7)


def build_prompts_from_file_controls(kind: str, state):
    iterate = gr.Checkbox(False, label="Iterate seed every line", elem_id=f"{kind}_prompts_from_file_checkbox_iterate")
    same_seed = gr.Checkbox(False, label="Use same random seed for all lines",
                            elem_id=f"{kind}_prompts_from_file_checkbox_iterate_batch")
    position = gr.Radio(list(POSITIONS), value="start", label="Insert prompts at the",
                        elem_id=f"{kind}_prompts_from_file_prompt_position")
    make_combined = gr.Checkbox(False, label="Make a combined image containing all outputs (if more than one)",
                                elem_id=f"{kind}_prompts_from_file_make_combined")
    prompt_txt = gr.Textbox(label="List of prompt inputs", lines=2, elem_id=f"{kind}_prompts_from_file_prompt_txt")
    upload = gr.File(label="Upload prompt inputs", type="binary", elem_id=f"{kind}_prompts_from_file_file")
    upload.upload(load_prompt_file, inputs=upload, outputs=[upload, prompt_txt], show_progress="hidden",
                  queue=False)
    return [iterate, same_seed, position, prompt_txt, make_combined], list


register_script_ui(ScriptUi(TITLE, build_prompts_from_file_controls))
