"""The img2img tab's Image CFG Scale slider: A1111's, shown while an instruct-pix2pix checkpoint is loaded.

A1111 builds it hidden next to CFG Scale (0 to 3, step 0.05, default 1.5, elem_id `img2img_image_cfg_scale`) and shows
it for models whose `cond_stage_key` is "edit"; other models ignore the value, so a visible slider there would only
mislead. Here the page is served with the slider's visibility for the model loaded then (`serve_props`), and the
Settings tab's checkpoint Load updates it (`image_cfg_visibility`).
"""

from __future__ import annotations

import gradio as gr

from pipelines.instruct_pix2pix import DEFAULT_IMAGE_CFG_SCALE, INFOTEXT_KEY, is_instruct_pix2pix_unet

SLIDER_RANGE = (0.0, 3.0)  # A1111's slider; the API and Python take up to GenerationLimits.max_cfg_scale


def instruct_pix2pix_loaded(state) -> bool:
    """Whether the server's loaded model is an instruct-pix2pix checkpoint (False while none is in memory)."""
    model = state.holder.loaded_model()
    # `getattr`: a served page asks whatever the holder keeps, and a model without a UNet (an OpenVINO graph, a
    # stand-in) is no instruct-pix2pix checkpoint
    return model is not None and is_instruct_pix2pix_unet(getattr(model, "unet", None))


def build_image_cfg_slider(state) -> gr.Slider:
    """The slider, inside the current layout block; each page is served with it shown or hidden for the model."""
    from webui.ui.form_components import form_slider
    from webui.ui.page_values import serve_props

    slider = form_slider(*SLIDER_RANGE, value=DEFAULT_IMAGE_CFG_SCALE, step=0.05, elem_id="img2img_image_cfg_scale",
                         label="Image CFG Scale (instruct-pix2pix: higher keeps closer to the image)",
                         visible=instruct_pix2pix_loaded(state))
    serve_props(slider, lambda: {"visible": instruct_pix2pix_loaded(state)})
    return slider


def image_cfg_visibility(state):
    """The slider's update after a checkpoint switch."""
    return gr.update(visible=instruct_pix2pix_loaded(state))


def infotext_image_cfg_values(parsed: dict) -> tuple[dict[str, object], list[str]]:
    """({"image_cfg_scale": value} or {}, notes) from a parsed infotext: a missing key keeps the slider's value, as
    A1111's paste does; a value the slider cannot take is named in a note."""
    if INFOTEXT_KEY not in parsed:
        return {}, []
    try:
        value = float(str(parsed[INFOTEXT_KEY]).strip())
    except ValueError:
        value = None
    low, high = SLIDER_RANGE
    if value is None or not low <= value <= high:
        return {}, [f"{INFOTEXT_KEY}: {parsed[INFOTEXT_KEY]!r} is not a number in [{low:g}, {high:g}]; kept the "
                    "current value."]
    return {"image_cfg_scale": value}, []
