"""Settings > Saving images: A1111's switches for where each saved image's infotext goes.

"Write infotext to metadata of the generated image" (`enable_pnginfo`, on) puts it in the PNG's `parameters` chunk
(saved files, gallery files, API images); "Create a text file next to every image with generation parameters"
(`save_txt`, off) writes `<name>.txt` beside every saved image and grid (`pipelines.png.InfotextWriting`). Applied
with their own button, as the infotext settings are; the values are `/sdapi/v1/options`' keys of the same names.
"Font for image grids that have text" (`font`, empty) is the font file X/Y/Z plot and Prompt matrix legends are drawn
in (`pipelines.grid_fonts`), applied with a button of its own.
"""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState

# A1111's labels (modules/shared_options.py, Saving images/grids), with the key each one writes.
LABELS = {
    "enable_pnginfo": "Write infotext to metadata of the generated image (enable_pnginfo)",
    "save_txt": "Create a text file next to every image with generation parameters (save_txt)",
}
SAVING_KEYS = tuple(LABELS)
FONT_LABEL = "Font for image grids that have text (font)"  # A1111's label, with its key


def saving_values(checked: list) -> dict:
    """The checkboxes' values as option changes, in `SAVING_KEYS` order; not cast with bool(), so a Gradio client's
    "false" is refused by the option's check instead of read as True."""
    return dict(zip(SAVING_KEYS, checked))


def build_saving_settings(state: ServerState, apply_settings) -> None:
    """The two checkboxes and their Apply button."""
    with gr.Row():
        boxes = [gr.Checkbox(value=lambda key=key: state.options.get(key), label=label, elem_id=f"settings_{key}")
                 for key, label in LABELS.items()]
    gr.Markdown("Off, the first leaves the generation parameters out of new PNG files (saved, gallery and API "
                "images); the API's `info` and the gallery's infotext box still show them. The text file holds the "
                "same infotext (UTF-8), and `mixkit generate --infotext FILE.txt` reads it back.")
    status = gr.Markdown()
    button = gr.Button("Apply saving settings", elem_id="settings_apply_saving")
    button.click(lambda *checked: apply_settings(state, saving_values(list(checked))), inputs=boxes, outputs=status)
    build_grid_font_setting(state, apply_settings)


def build_grid_font_setting(state: ServerState, apply_settings) -> None:
    """A1111's `font`: a path on the server, checked (exists, FreeType loads it) when applied."""
    font = gr.Textbox(value=lambda: state.options.get("font"), label=FONT_LABEL, elem_id="settings_font",
                      placeholder="/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                      info="A .ttf, .otf or .ttc file on the server, for X/Y/Z plot and Prompt matrix labels. Empty: "
                           "Pillow's font, or a system font (DejaVu Sans, Noto Sans CJK, ...) for labels with "
                           "characters it lacks.")
    status = gr.Markdown()
    button = gr.Button("Apply grid font", elem_id="settings_apply_font")
    button.click(lambda path: apply_settings(state, {"font": path}), inputs=font, outputs=status)
