"""ControlNet units in the txt2img/img2img tabs: `control_net_unit_count` accordions, enabled ones sent as a list.

Each unit has the extension's controls (resize mode, control mode, pixel perfect, preprocessor resolution and
thresholds, with its defaults) and is checked by `webui.api_controlnet.ui_unit_spec`, the API's own unit check, so
a unit gives the same image from the UI and from a request; errors name the unit ("ControlNet Unit 1: ...") as the
accordions are titled. A unit's mask is an uploaded image of the control image's size (white = masked), beside the
control image: the extension draws it on the image's canvas, which this page's Gradio image widget cannot do
(`pipelines.controlnet.unit_mask` says how the inpaint preprocessors and the others use it). "Preview preprocessor"
shows the map the unit's preprocessor makes of its image (not of a drawn mask), as the extension's "Run
preprocessor" does, through the same function as `/controlnet/detect`. A unit's effective region (the extension's
"Effective Region Mask": where its control applies, `pipelines.controlnet.region_mask`) is an upload too.
A unit whose preprocessor is one of the extension's IP-Adapter modules (ip-adapter_clip_sd15, ip-adapter_clip_sdxl,
ip-adapter-auto, ...) is an image prompt: its model is an `ip-adapter*` file of the ControlNet folder, its control
image the reference picture (img2img: the init image when empty), its weight the adapter's scale and its control
steps the adapter's guidance window, checked by `webui.api_ip_adapter.ui_ip_adapter_unit_spec` as the API checks
such a unit. Its map controls (resize mode, Pixel Perfect, preprocessor resolution, thresholds, preview) are hidden
while an IP-Adapter preprocessor is chosen, with a note in their place: they do not act on an image prompt, here as in
the extension.
"""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState

UNIT_FIELDS = ("enabled", "image", "preprocessor", "model", "weight", "start", "end", "resize_mode", "control_mode",
               "pixel_perfect", "processor_res", "threshold_a", "threshold_b", "mask", "effective_region_mask")
RESIZE_MODE_CHOICES = ("Just Resize", "Crop and Resize", "Resize and Fill")  # the extension's, default Crop and Resize
CONTROL_MODE_CHOICES = ("Balanced", "My prompt is more important", "ControlNet is more important")
# Shown in place of the map controls while an IP-Adapter preprocessor is chosen. sd-webui-controlnet ignores them for
# its IP-Adapter modules too: their preprocessor returns CLIP embeddings, not an image, so the resize mode (which fits
# a control map to the output) never applies, and Pixel Perfect only sets a resolution the CLIP encoder does not read.
IP_ADAPTER_NOTE = ("**IP-Adapter unit:** the control image is the reference picture; the image encoder reads it at its "
                   "own input size (the shorter side scaled to it, then a centre crop), so Resize mode, Pixel Perfect, "
                   "Preprocessor resolution and the thresholds do not apply (sd-webui-controlnet ignores them for its "
                   "IP-Adapter modules as well) and are hidden.")


def preview_control_map(image, preprocessor: str, pixel_perfect: bool, processor_res: float, threshold_a: float,
                        threshold_b: float, resize_mode: str, width: float, height: float):
    """The control map a unit's preprocessor makes of its image (an RGB PIL image), at the resolution generation
    uses: the unit's "Preprocessor resolution", or with Pixel Perfect the one fitting the tab's width x height.
    ValueError/TypeError name what is wrong (no image, an unknown preprocessor, a threshold out of range)."""
    from pipelines.controlnet.detect import detect_control_map
    from pipelines.controlnet.resolution import pixel_perfect_resolution
    from webui.api_controlnet import RESIZE_MODES, default_if_negative

    from webui.api_ip_adapter import is_ip_adapter_module

    if is_ip_adapter_module(preprocessor):
        raise ValueError(f"{preprocessor} makes no control map: the unit's image is the IP-Adapter's reference picture, "
                         "which its CLIP image encoder reads as it is.")
    if image is None:
        raise ValueError("Upload a control image to this unit first; the preview shows what its preprocessor makes of "
                         "it.")
    if pixel_perfect:
        resolution = pixel_perfect_resolution(image.size, int(width), int(height),
                                              RESIZE_MODES.get(str(resize_mode).lower(), "crop and resize"))
    else:
        resolution = int(processor_res) if float(processor_res).is_integer() else processor_res
    return detect_control_map(image, preprocessor, processor_res=resolution,
                              threshold_a=default_if_negative(threshold_a), threshold_b=default_if_negative(threshold_b))


def build_controlnet_units(state: ServerState, kind: str, count: int, size_inputs: tuple = ()) -> list:
    """`count` ControlNet units' widgets (UNIT_FIELDS each, flattened) in accordions; [] without a ControlNet folder.

    `size_inputs`: the tab's (width, height) widgets, which a Pixel Perfect preview reads.

    Like sd-webui-controlnet, the number of units is the `control_net_unit_count` setting read when
    the page is built (a change takes effect after a server restart).
    """
    from pipelines.controlnet.resolution import DEFAULT_PROCESSOR_RES, PROCESSOR_RES_RANGE
    from pipelines.preprocessors import PREPROCESSORS
    from webui.api_ip_adapter import IP_ADAPTER_MODULES

    if state.controlnets is None:
        return []
    widgets = []
    for index in range(count):
        prefix = f"{kind}_controlnet_{index}"
        with gr.Accordion(f"ControlNet Unit {index}", open=False, elem_id=prefix):
            enabled = gr.Checkbox(False, label="Enable", elem_id=f"{prefix}_enable")
            image = gr.Image(label="Control image" + (" (empty: use the init image)" if kind == "img2img" else ""),
                             type="pil", image_mode="RGB", height=220, elem_id=f"{prefix}_image")
            with gr.Row():
                preprocessor = gr.Dropdown(PREPROCESSORS.names() + list(IP_ADAPTER_MODULES), value="none",
                                           label="Preprocessor (ip-adapter_*: an image prompt)",
                                           elem_id=f"{prefix}_preprocessor")
                model = gr.Dropdown(state.controlnets.names(), label="Model", elem_id=f"{prefix}_model")
            with gr.Row():
                weight = gr.Slider(0, 2, value=1, step=0.05, label="Control weight", elem_id=f"{prefix}_weight")
                start = gr.Slider(0, 1, value=0, step=0.01, label="Starting control step", elem_id=f"{prefix}_start")
                end = gr.Slider(0, 1, value=1, step=0.01, label="Ending control step", elem_id=f"{prefix}_end")
            with gr.Row():
                resize_mode = gr.Radio(RESIZE_MODE_CHOICES, value="Crop and Resize", label="Resize mode",
                                       elem_id=f"{prefix}_resize_mode")
                control_mode = gr.Radio(CONTROL_MODE_CHOICES, value="Balanced", label="Control mode",
                                        elem_id=f"{prefix}_control_mode")
            with gr.Row():
                pixel_perfect = gr.Checkbox(False, label="Pixel Perfect", elem_id=f"{prefix}_pixel_perfect")
                processor_res = gr.Slider(*PROCESSOR_RES_RANGE, value=DEFAULT_PROCESSOR_RES, step=8,
                                          label="Preprocessor resolution", elem_id=f"{prefix}_processor_res")
                threshold_a = gr.Number(-1, label="Threshold A (-1: the preprocessor's default)",
                                        elem_id=f"{prefix}_threshold_a")
                threshold_b = gr.Number(-1, label="Threshold B (-1: the preprocessor's default)",
                                        elem_id=f"{prefix}_threshold_b")
            mask = gr.Image(label="Mask (optional; the control image's size, white = masked: the area inpaint and "
                                  "inpaint_only repaint, or for other preprocessors a drawing used as the picture)",
                            type="pil", image_mode="L", height=220, elem_id=f"{prefix}_mask")
            region = gr.Image(label="Effective region (optional; white = this unit's control applies there, black = "
                                    "it does not; any size, stretched to the image)",
                              type="pil", image_mode="L", height=220, elem_id=f"{prefix}_effective_region_mask")
            with gr.Row():
                preview = gr.Button("Preview preprocessor", scale=0, min_width=180, elem_id=f"{prefix}_preview_run")
                preview_map = gr.Image(label="Preprocessor preview", type="pil", interactive=False, height=220,
                                       format="png", elem_id=f"{prefix}_preview_map")
            ip_note = gr.Markdown(IP_ADAPTER_NOTE, visible=False, elem_id=f"{prefix}_ip_adapter_note")
        preview.click(_shown_preview, inputs=[image, preprocessor, pixel_perfect, processor_res, threshold_a,
                                              threshold_b, resize_mode, *size_inputs], outputs=preview_map)
        # a pasted infotext sets the preprocessor too, and .change follows it
        preprocessor.change(ip_adapter_visibility, inputs=preprocessor,
                            outputs=[resize_mode, pixel_perfect, processor_res, threshold_a, threshold_b, preview,
                                     preview_map, ip_note])
        widgets += [enabled, image, preprocessor, model, weight, start, end, resize_mode, control_mode, pixel_perfect,
                    processor_res, threshold_a, threshold_b, mask, region]
    return widgets


def ip_adapter_visibility(preprocessor: str) -> list:
    """Visibility updates for a unit's (resize mode, pixel perfect, processor res, threshold A, threshold B, preview
    button, preview map, IP-Adapter note) when its preprocessor becomes `preprocessor`: an IP-Adapter module hides the
    map controls, which do not act on an image prompt, and shows the note saying so."""
    from webui.api_ip_adapter import is_ip_adapter_module

    image_prompt = is_ip_adapter_module(preprocessor)
    return [gr.update(visible=not image_prompt)] * 7 + [gr.update(visible=image_prompt)]


def _shown_preview(image, preprocessor, pixel_perfect, processor_res, threshold_a, threshold_b, resize_mode,
                   width=512, height=512):
    """`preview_control_map` for the Preview button: a refusal is shown as an error and leaves the last preview."""
    from pipelines.preprocessors import PreprocessorWeightsMissing
    from webui.ui.errors import refused

    try:
        return preview_control_map(image, preprocessor, pixel_perfect, processor_res, threshold_a, threshold_b,
                                   resize_mode, width, height)
    except (ValueError, TypeError, PreprocessorWeightsMissing) as error:
        raise refused(str(error)) from None


def with_controlnet(state: ServerState, kind: str, params, control_values: list):
    """`params` as ControlNet / IP-Adapter params carrying the enabled units (in unit order); unchanged if none is.

    `control_values` holds UNIT_FIELDS values per unit, one unit after the other, as the widgets are laid out. Units
    with an IP-Adapter preprocessor become the params' `ip_adapter*` fields, the others ControlNet unit specs.
    """
    if len(control_values) % len(UNIT_FIELDS):
        raise ValueError(f"Expected {len(UNIT_FIELDS)} values per ControlNet unit, got {len(control_values)} values.")
    from webui.api_controlnet import ui_unit_spec
    from webui.api_ip_adapter import is_ip_adapter_module, ui_ip_adapter_unit_spec

    specs, ip_specs = [], []
    for index in range(0, len(control_values), len(UNIT_FIELDS)):
        fields = dict(zip(UNIT_FIELDS, control_values[index:index + len(UNIT_FIELDS)]))
        if not fields["enabled"]:
            continue
        unit = index // len(UNIT_FIELDS)
        label = f"ControlNet Unit {unit}"  # as the accordion is titled
        if fields["image"] is None and kind == "txt2img":
            raise ValueError(f"{label} needs a control image" + (" (the reference picture of its IP-Adapter)."
                                                                 if is_ip_adapter_module(fields["preprocessor"]) else "."))
        if is_ip_adapter_module(fields["preprocessor"]):
            ip_specs.append(ui_ip_adapter_unit_spec(label, state.controlnets, fields))  # messages name the unit
            continue
        try:
            spec = ui_unit_spec(state.controlnets, fields)
        except (ValueError, TypeError, KeyError) as error:
            message = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
            raise ValueError(f"{label}: {message}") from None
        spec.label = label  # for refusals made when the job is queued
        specs.append(spec)
    if ip_specs:
        return _with_ip_adapter_units(kind, params, specs, ip_specs)
    if not specs:
        return params
    from pipelines.controlnet import ControlHiresParams, ControlImg2ImgParams, ControlTxt2ImgParams

    if hasattr(params, "hr_scale"):  # hires fix: the units guide both passes
        params_class = ControlHiresParams
    else:
        params_class = ControlTxt2ImgParams if kind == "txt2img" else ControlImg2ImgParams
    return params_class(**vars(params), controlnets=specs)


def _with_ip_adapter_units(kind: str, params, specs: list, ip_specs: list):
    """The params with IP-Adapter units (and ControlNet `specs`, if any) in the class the pipeline takes; img2img's
    units without an image take its init image, as the extension's do."""
    from pipelines.ip_adapter_controlnet import params_class_for
    from pipelines.ip_adapter_hires import hires_params_class
    from pipelines.ip_adapter_inputs import MAX_IP_ADAPTERS
    from webui.api_ip_adapter import ip_adapter_fields

    if len(ip_specs) > MAX_IP_ADAPTERS:
        raise ValueError(f"{len(ip_specs)} units use an IP-Adapter preprocessor; at most {MAX_IP_ADAPTERS} run in one "
                         "generation. Disable some.")
    init_image = params.init_images[0] if kind == "img2img" else None
    extra = {"controlnets": specs} if specs else {}
    # hires fix: the adapters guide both passes, as the extension's units (hr_option "Both") do
    params_class = hires_params_class(bool(specs), True) if hasattr(params, "hr_scale") else \
        params_class_for(kind, bool(specs), True)
    return params_class(**vars(params), **extra, **ip_adapter_fields(ip_specs, init_image=init_image))
