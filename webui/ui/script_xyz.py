"""X/Y/Z plot's controls under the Script dropdown, as A1111's: three axes (type, values, a values dropdown for axes
with choices and its "fill values" button), Draw legend, Include Sub Images / Sub Grids, Keep -1 for seeds, Vary seeds
for X/Y/Z, Grid margins and "Use text inputs instead of dropdowns". Their values become A1111's 18 `script_args`.

The type dropdowns offer the axes mixkit runs, by label (the script takes labels as well as A1111's indexes).
"""

from __future__ import annotations

import gradio as gr

from pipelines.scripts.xyz_axes import PlotContext, axes_for, XYZ_AXES
from pipelines.scripts.xyz_config import MAX_MARGIN
from pipelines.scripts.xyz_values import join_values, split_values
from webui.ui.script_controls import ScriptUi, register_script_ui

FILL_SYMBOL = "\U0001f4d2"  # A1111's 📒 "fill values" button


def axis_choices(label: str | None, state) -> list[str] | None:
    """The valid values of a dropdown axis (None for a typed one), from the server as it is now. A cleared type
    dropdown (None) is Nothing, as the plot reads it (`xyz_script_args`)."""
    from webui.api_selectable_scripts import script_context

    axis = XYZ_AXES.get(label or "Nothing")
    if axis.choices is None:
        return None
    return axis.choices(PlotContext.of(**script_context(state)))


def select_axis(label: str, text: str, chosen: list, csv_mode: bool, state) -> tuple:
    """A1111's select_axis: a dropdown axis shows its values dropdown (unless csv_mode) and the fill button; values
    already typed or chosen move over where they are valid."""
    choices = axis_choices(label, state)
    has_choices = choices is not None
    if has_choices:
        if csv_mode and chosen:
            text, chosen = join_values([value for value in chosen if value in choices]), []
        elif not csv_mode and text:
            chosen, text = [value for value in split_values(text) if value in choices], ""
    return (gr.update(visible=has_choices), gr.update(visible=not has_choices or csv_mode, value=text),
            gr.update(choices=choices or [], visible=has_choices and not csv_mode, value=chosen or []))


def fill_values(label: str, csv_mode: bool, state) -> tuple:
    """A1111's fill button: every valid value of the axis, in the text box (csv_mode) or the dropdown."""
    choices = axis_choices(label, state)
    if choices is None:
        return gr.update(), gr.update()
    return (gr.update(value=join_values(choices)), gr.update()) if csv_mode else (gr.update(), gr.update(value=choices))


def build_xyz_controls(kind: str, state):
    labels = [axis.label for axis in axes_for(kind)]
    rows = []
    for name, default in (("x", "Seed"), ("y", "Nothing"), ("z", "Nothing")):
        upper = name.upper()
        with gr.Row():
            axis_type = gr.Dropdown(labels, value=default, label=f"{upper} type", elem_id=f"{kind}_xyz_{name}_type")
            values = gr.Textbox(label=f"{upper} values", lines=1, elem_id=f"{kind}_xyz_{name}_values")
            dropdown = gr.Dropdown([], value=[], label=f"{upper} values", multiselect=True, visible=False,
                                   elem_id=f"{kind}_xyz_{name}_values_dropdown")
            fill = gr.Button(FILL_SYMBOL, visible=False, size="sm", min_width=40, elem_id=f"{kind}_xyz_{name}_fill")
        rows.append((axis_type, values, dropdown, fill))
    with gr.Row():
        draw_legend = gr.Checkbox(True, label="Draw legend", elem_id=f"{kind}_xyz_draw_legend")
        no_fixed_seeds = gr.Checkbox(False, label="Keep -1 for seeds", elem_id=f"{kind}_xyz_no_fixed_seeds")
        include_lone_images = gr.Checkbox(False, label="Include Sub Images", elem_id=f"{kind}_xyz_include_lone_images")
        include_sub_grids = gr.Checkbox(False, label="Include Sub Grids", elem_id=f"{kind}_xyz_include_sub_grids")
    with gr.Row():
        vary = [gr.Checkbox(False, label=f"Vary seeds for {name}", elem_id=f"{kind}_xyz_vary_seeds_{name.lower()}")
                for name in "XYZ"]
        margin_size = gr.Slider(0, MAX_MARGIN, value=0, step=2, label="Grid margins (px)",
                                elem_id=f"{kind}_xyz_margin_size")
        csv_mode = gr.Checkbox(False, label="Use text inputs instead of dropdowns", elem_id=f"{kind}_xyz_csv_mode")
    for axis_type, values, dropdown, fill in rows:
        axis_type.change(lambda label, text, chosen, csv: select_axis(label, text, chosen, csv, state),
                         inputs=[axis_type, values, dropdown, csv_mode], outputs=[fill, values, dropdown], queue=False)
        fill.click(lambda label, csv: fill_values(label, csv, state), inputs=[axis_type, csv_mode],
                   outputs=[values, dropdown], queue=False)

    def switch_mode(csv, *axes):
        updates = []
        for index in range(3):
            label, text, chosen = axes[index * 3:index * 3 + 3]
            updates += select_axis(label, text, chosen, csv, state)
        return updates

    axis_inputs = [component for axis_type, values, dropdown, _ in rows for component in (axis_type, values, dropdown)]
    csv_mode.change(switch_mode, inputs=[csv_mode, *axis_inputs],
                    outputs=[component for _, values, dropdown, fill in rows for component in (fill, values, dropdown)],
                    queue=False)
    components = [*axis_inputs, draw_legend, include_lone_images, include_sub_grids, no_fixed_seeds, *vary,
                  margin_size, csv_mode]
    return components, xyz_script_args


def xyz_script_args(values: list) -> list:
    """The controls' values as A1111's script_args (the same order: the controls were built in it)."""
    args = list(values)
    for index in (0, 3, 6):  # a cleared type dropdown shows no values dropdown: it is Nothing, not the X default Seed
        args[index] = args[index] or "Nothing"
    args[16] = int(args[16] or 0)  # the slider's 12.0
    return args


register_script_ui(ScriptUi("X/Y/Z plot", build_xyz_controls))
