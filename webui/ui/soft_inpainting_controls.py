"""A1111's "Soft inpainting" accordion in the img2img tab's inpaint section: its checkbox and six sliders.

Labels, ranges, steps and defaults are A1111's (`pipelines.soft_inpainting.SOFT_INPAINTING_FIELDS`); the values become
the same `SoftInpainting` the API's `alwayson_scripts` and the CLI's flags make, checked by the pipeline. A paste
fills the accordion from A1111's infotext keys as its script registers them (`infotext_fields`): a key the infotext
lacks keeps the form's value, as A1111's paste skips it.
"""

from __future__ import annotations

import gradio as gr

from pipelines.soft_inpainting import ENABLED_INFOTEXT_KEY, SOFT_INPAINTING_FIELDS, SoftInpainting

# the accordion's value names, in widget order: the checkbox, then one per slider ("si_" + the SoftInpainting field)
SOFT_INPAINTING_UI_FIELDS = ("soft_inpainting", *(f"si_{field}" for field, *_ in SOFT_INPAINTING_FIELDS))
# A1111's note above the sliders
INTRO = ("Soft inpainting allows you to **seamlessly blend original content with inpainted content** according to "
         "the mask opacity. **High _Mask blur_** values are recommended!")


def build_soft_inpainting_controls() -> dict:
    """The accordion's widgets by value name (SOFT_INPAINTING_UI_FIELDS), with A1111's element ids."""
    from webui.ui.form_components import form_slider

    defaults = SoftInpainting()
    with gr.Accordion("Soft inpainting", open=False, elem_id="soft_inpainting"):
        enabled = gr.Checkbox(False, label="Soft inpainting", elem_id="soft_inpainting_enabled")
        gr.Markdown(INTRO)
        sliders = []
        for index, (field, _, label, low, high, step) in enumerate(SOFT_INPAINTING_FIELDS):
            if field == "composite_mask_influence":
                gr.Markdown("### Pixel Composite Settings")
            sliders.append(form_slider(low, high, value=getattr(defaults, field), step=step, label=label,
                                       elem_id=field))
    return dict(zip(SOFT_INPAINTING_UI_FIELDS, [enabled, *sliders]))


def soft_inpainting_value(fields: dict) -> SoftInpainting | None:
    """The form's SoftInpainting (`fields`: value name -> value), None when the checkbox is off or absent."""
    if not fields.get("soft_inpainting"):
        return None
    return SoftInpainting(**{field: float(fields[f"si_{field}"]) for field, *_ in SOFT_INPAINTING_FIELDS})


def infotext_soft_inpainting_values(parsed: dict) -> tuple[dict[str, object], list[str]]:
    """(accordion values, notes) from a parsed infotext: each A1111 key it has, a value outside the slider's range
    or not a number left out and named in a note."""
    values: dict[str, object] = {}
    notes: list[str] = []
    if ENABLED_INFOTEXT_KEY in parsed:
        values["soft_inpainting"] = str(parsed[ENABLED_INFOTEXT_KEY]).strip() == "True"
    for field, key, label, low, high, _ in SOFT_INPAINTING_FIELDS:
        if key not in parsed:
            continue
        try:
            number = float(str(parsed[key]).strip())
        except ValueError:
            number = None
        if number is not None and low <= number <= high:
            values[f"si_{field}"] = number
        else:
            notes.append(f"{key}: {parsed[key]!r} is not a number in [{low:g}, {high:g}]; kept the current value.")
    return values, notes
