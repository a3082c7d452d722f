"""A1111's Refiner accordion (txt2img and img2img): a checkpoint from the server's list and "Switch at", and
mixkit's "Config folder": the diffusers folder among the server's checkpoints whose configs a single-file refiner
is read with (the API's `refiner_config_dir`, `webui.refiner_config_folders`), for a refiner file the shipped
SD/SDXL configs do not describe.

The form's values go through the API's own conversion (`webui.api_convert.refiner_values`), so the checkpoint is
found by the same titles and "Switch at" checked by the same pipeline check as a `refiner_checkpoint` request.
A paste fills the accordion as A1111's refiner script registers its paste fields: enabled when the infotext has a
`Refiner` key, the checkpoint and `Refiner switch at`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import gradio as gr

REFINER_FIELDS = ("enable_refiner", "refiner_checkpoint", "refiner_switch_at", "refiner_config_dir")
NO_CHECKPOINT = "None"  # A1111's dropdown entry for "no refiner"; the Config folder's for "the usual configs"


def build_refiner_controls(kind: str, checkpoint_titles: Callable[[], list[str]],
                           config_folder_titles: Callable[[], list[str]]) -> list:
    """The accordion's widgets, in REFINER_FIELDS order; the dropdowns list the checkpoints (and the diffusers folders
    among them) again when opened (a file added to the models folder since the server started is there once the list
    is refreshed)."""
    from pipelines.refiner import DEFAULT_SWITCH_AT
    from webui.ui.form_components import form_slider

    with gr.Accordion("Refiner", open=False, elem_id=f"{kind}_refiner"):
        enabled = gr.Checkbox(False, label="Enable refiner", elem_id=f"{kind}_enable_refiner")
        with gr.Row():
            checkpoint = gr.Dropdown(choices=[NO_CHECKPOINT, *checkpoint_titles()], value=NO_CHECKPOINT,
                                     label="Checkpoint", elem_id=f"{kind}_refiner_checkpoint", allow_custom_value=True)
            # A1111's slider is 0.01..1 step 0.01, default 0.8; its 1 refines no step (the last call's ratio is
            # 0.999) and the pipeline refuses it, so the slider stops at 0.99
            switch_at = form_slider(0.01, 0.99, value=DEFAULT_SWITCH_AT, step=0.01, label="Switch at",
                                    elem_id=f"{kind}_refiner_switch_at")
        # no A1111 counterpart (it reads a refiner file with its yaml): "None" reads it as usual, with the shipped
        # configs of its family (or the model's own configs folder when the model was loaded with one)
        config_folder = gr.Dropdown(choices=[NO_CHECKPOINT, *config_folder_titles()], value=NO_CHECKPOINT,
                                    label="Config folder (for a refiner file of a non-standard architecture)",
                                    elem_id=f"{kind}_refiner_config_dir")
    checkpoint.focus(lambda: gr.update(choices=[NO_CHECKPOINT, *checkpoint_titles()]), outputs=checkpoint,
                     queue=False)
    config_folder.focus(lambda: gr.update(choices=[NO_CHECKPOINT, *config_folder_titles()]), outputs=config_folder,
                        queue=False)
    return [enabled, checkpoint, switch_at, config_folder]


def with_refiner(params, values: list, catalog):
    """`params` with the accordion's refiner and config folder (translated as the API translates `refiner_checkpoint`
    and `refiner_config_dir`, checked by the pipeline's check), or unchanged when the accordion is off; on with no
    checkpoint, only its switch point (where a plot's Refiner checkpoint axis switches), as the API keeps a
    request's."""
    from webui.api_convert import refiner_values

    fields = dict(zip(REFINER_FIELDS, values))
    if not fields["enable_refiner"]:
        return params
    chosen = refiner_values(fields["refiner_checkpoint"], fields["refiner_switch_at"], catalog,
                            fields["refiner_config_dir"])
    return replace(params, **chosen) if chosen else params


def infotext_refiner_values(parsed: dict, checkpoint_of: Callable[[str], str | None]) -> tuple[dict, list[str]]:
    """(accordion values, notes) of an infotext: A1111's refiner paste fields. `checkpoint_of` maps the infotext's
    `Refiner` title to this server's dropdown title (None: not here, named in a note)."""
    name = parsed.get("Refiner")
    if not name:
        return {"enable_refiner": False}, []
    values: dict[str, object] = {"enable_refiner": True}
    notes = []
    title = checkpoint_of(str(name))
    if title is None:
        notes.append(f"Refiner: the image was refined with {name!r}, which is not among this server's checkpoints; "
                     "add it to the models folder (or pick another refiner) to reproduce the image.")
        values["enable_refiner"] = False
    else:
        values["refiner_checkpoint"] = title
    switch = parsed.get("Refiner switch at")
    try:
        number = float(switch) if switch not in (None, "") else None
    except ValueError:
        number = None
    if number is not None and 0 < number < 1:
        values["refiner_switch_at"] = number
    elif switch not in (None, ""):
        notes.append(f"Refiner switch at: {switch!r} is not a fraction in (0, 1); kept the current value.")
    return values, notes
