"""The txt2img and img2img tabs: form, Generate/Interrupt/Skip, live progress with previews, gallery.

The handler validates with the same checks as the API (`ServerState.check_params`), queues the
job on the shared worker and polls its progress, so UI and API users wait in one queue.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import Callable

import gradio as gr

from pipelines.image_prep import IMG2IMG_RESIZE_MODES
from pipelines.inpaint_mask import MASKED_CONTENT
from pipelines.outpaint import OUTPAINT_DIRECTIONS, outpaint_sides
from pipelines.params import seed_resize_off_note
from webui.refiner_config_folders import named_as_picked
from webui.server_state import ServerState
from webui.ui.controlnet_units import build_controlnet_units, with_controlnet
from webui.ui.errors import refused, show_warning
from webui.ui.form_components import form_slider
from webui.ui.image_cfg_controls import build_image_cfg_slider
from webui.ui.progress_view import progress_html
from webui.ui.prompt_styles import build_styles_controls, read_styles, styled_params, wire_styles_controls
from webui.ui.soft_inpainting_controls import (
    SOFT_INPAINTING_UI_FIELDS, build_soft_inpainting_controls, soft_inpainting_value,
)
from webui.ui.reattach import (checked_task_id, follow_task, followed_task_id, gallery_result, page_owner,
                               registered_task, submit_js, task_box_for)
from webui.ui.widgets import GenerationWidgets, build_generation_widgets, values_to_params
from webui.worker import QueueFullError

IMG2IMG_MODES = ("img2img", "inpaint", "sketch", "outpaint")
OUTPAINT_SIDES = OUTPAINT_DIRECTIONS  # A1111's "Outpainting direction" checkboxes
OUTPAINT_MULTIPLE = 8  # the size step `submit_outpaint` checks the extended canvas against
OUTPAINT_METHODS = ("Poor man's outpainting", "Outpainting mk2")  # A1111's two outpainting scripts, by their titles
MASK_MODES = ("Inpaint masked", "Inpaint not masked")  # A1111's "Mask mode" radio
SEND_TARGETS = ("img2img", "inpaint", "extras")  # A1111's "Send to" buttons under the txt2img and img2img galleries
# The img2img inputs A1111's `img2img_paste_fields` fill (Mask blur, Mask mode, Masked content, Inpaint area, Masked
# area padding), named as `paste_infotext.infotext_inpaint_values` returns them.
INPAINT_PASTE_FIELDS = ("mask_blur", "mask_mode", "inpainting_fill", "only_masked", "only_masked_padding",
                        *SOFT_INPAINTING_UI_FIELDS)  # and the Soft inpainting accordion's (its infotext_fields)
# The img2img tab's own inputs, in the order `build_generate_tab` wires them (after the generation widgets).
IMG2IMG_FIELDS = ("editor", "mode", "resize_mode", "denoising_strength", "mask_blur", "inpainting_fill", "only_masked",
                  "only_masked_padding", "mask_mode", "mask_upload", "outpaint_pixels", "outpaint_fill", "outpaint_sides",
                  "outpaint_method", "outpaint_falloff", "outpaint_color_variation", *SOFT_INPAINTING_UI_FIELDS,
                  "image_cfg_scale")


def editor_mask(layers: list):
    """An L-mode mask (255 = repaint) from the editor's drawn layers, each read as an uploaded mask is read.

    `pipelines.inpaint_mask.binary_mask` is A1111's `create_binary_mask`: a stroke counts where its alpha is
    above 128, so the faint antialiased rim of a brush stroke is not repainted, as in A1111 and the API."""
    from PIL import ImageChops

    from pipelines.inpaint_mask import binary_mask

    mask = None
    for layer in layers or []:
        painted = binary_mask(layer.convert("RGBA"))
        mask = painted if mask is None else ImageChops.lighter(mask, painted)
    if mask is None or mask.getbbox() is None:
        return None
    return mask


def inpaint_mask_from(editor_layers: list, uploaded):
    """The inpaint mask: the uploaded one (A1111's "Inpaint upload") or the strokes painted in the editor.

    Both at once is refused: which one wins would be a silent guess."""
    painted = editor_mask(editor_layers)
    if uploaded is not None:
        if painted is not None:
            raise ValueError("Inpaint got both painted strokes and an uploaded mask; clear the strokes or remove "
                             "the uploaded mask.")
        return uploaded  # the pipeline reads it (alpha > 128, or its grey levels) exactly as the API does
    if painted is None:
        raise ValueError("Inpaint mode needs a mask: paint over the area to repaint, or upload a mask.")
    return painted


def check_mask_fits(mask, image_size: tuple[int, int]) -> list[str]:
    """The warnings the pipeline's mask check (`pipelines.inpaint_mask.prepare_mask`) gives for `mask` on an init
    image of `image_size`, run now so a refusal comes before anything is queued.

    It is the Python API's own rule, not a copy: a mask of another size is resized (a warning, returned here for
    the user to see) when its aspect ratio matches, and refused with a ValueError otherwise. A1111 resizes any
    mask with the img2img resize mode; refusing a mask that cannot line up is mixkit's documented choice."""
    import warnings

    from pipelines.inpaint_mask import prepare_mask

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prepare_mask(mask, image_size)
    return [str(warning.message) for warning in caught]


def outpaint_sides_from(image, pixels: int, directions: list[str]) -> dict[str, int]:
    """The Outpaint controls (pixels, A1111's up/down/left/right) -> pixels per side for `image`, rounded as the CLI and
    the API's Poor man's outpainting script round them (`pipelines.outpaint.outpaint_sides`: each extended axis up to
    the next multiple of 8, the extra shared between its sides), so any image size the API takes the UI takes too."""
    return outpaint_sides(image.width, image.height, pixels, list(directions or []), OUTPAINT_MULTIPLE)


def outpaint_request(image, values: dict) -> tuple[dict[str, int], dict[str, float] | None]:
    """(pixels per side, Outpainting mk2's fill settings or None for Poor man's) from the Outpaint controls, for
    `ServerState.submit_outpaint`; mk2's pixels are bounded by its own slider (`pipelines.outpaint_mk2.mk2_sides`)."""
    from pipelines.outpaint_mk2 import mk2_sides

    method = values["outpaint_method"]
    if method not in OUTPAINT_METHODS:
        raise ValueError(f"Outpaint method must be one of {', '.join(OUTPAINT_METHODS)}; got {method!r}.")
    pixels, directions = int(values["outpaint_pixels"]), list(values["outpaint_sides"] or [])
    if method == OUTPAINT_METHODS[0]:
        return outpaint_sides_from(image, pixels, directions), None
    return mk2_sides(image.width, image.height, pixels, directions, OUTPAINT_MULTIPLE), \
        {"falloff_exponent": float(values["outpaint_falloff"]),
         "color_variation": float(values["outpaint_color_variation"])}


def img2img_params(params, fields: dict, warn: Callable[[str], object] = warnings.warn):
    """Img2ImgParams from the txt2img-shaped `params` and the img2img tab's own inputs (`IMG2IMG_FIELDS` -> value).

    Outpaint mode takes its masked content from its own control, as A1111's "Poor man's outpainting" script does
    (default "fill"); the inpaint "Masked content" applies to inpaint and sketch. An inpaint mask is checked against
    the init image here (`check_mask_fits`), so a mask that cannot line up is refused before anything is queued; its
    warnings go to `warn` (the UI passes its redacting `show_warning`)."""
    from pipelines.image_prep import normalize_init_image
    from pipelines.img2img import Img2ImgParams

    editor_value, mode = fields["editor"], fields["mode"]
    if not editor_value or editor_value.get("background") is None:
        raise ValueError("Drop an image into the img2img editor first.")
    if fields["mask_mode"] not in MASK_MODES:
        raise ValueError(f"Mask mode must be one of {', '.join(MASK_MODES)}; got {fields['mask_mode']!r}.")
    background = normalize_init_image(editor_value["background"])  # transparency on white, as A1111
    mask = inpaint_mask_from(editor_value.get("layers"), fields["mask_upload"]) if mode == "inpaint" else None
    if mask is not None:
        for message in check_mask_fits(mask, background.size):
            warn(message)
    init = editor_value["composite"].convert("RGB") if mode == "sketch" else background
    fill = fields["outpaint_fill"] if mode == "outpaint" else fields["inpainting_fill"]
    return Img2ImgParams(**vars(params), init_images=[init], denoising_strength=float(fields["denoising_strength"]),
                         resize_mode=fields["resize_mode"], mask=mask, mask_blur=int(fields["mask_blur"]),
                         inpainting_fill=fill, inpaint_full_res=bool(fields["only_masked"]),
                         inpaint_full_res_padding=int(fields["only_masked_padding"]),
                         inpainting_mask_invert=mode == "inpaint" and fields["mask_mode"] == MASK_MODES[1],
                         soft_inpainting=soft_inpainting_value(fields),
                         image_cfg_scale=float(fields["image_cfg_scale"]))


@dataclass
class GenerateTab:
    kind: str
    widgets: GenerationWidgets
    denoising_strength: object = None  # img2img only
    image_cfg_scale: object = None  # img2img only: the Image CFG Scale slider (webui.ui.image_cfg_controls)
    init_image: object = None  # img2img only: the editor PNG Info sends its image to
    hires: list | None = None  # txt2img only: the Hires. fix widgets, in `HIRES_FIELDS` order
    refiner: list = field(default_factory=list)  # the Refiner accordion's widgets, in `REFINER_FIELDS` order
    mode: object = None  # img2img only: the img2img/inpaint/sketch/outpaint radio
    gallery: object = None
    infotexts: object = None  # gr.State: the last result's infotexts, in gallery order
    selected: object = None  # gr.State: the gallery image the user clicked (None: the first)
    send_buttons: dict = field(default_factory=dict)  # SEND_TARGETS -> button under the gallery
    paste: object = None  # A1111's ↙️ button: fill the form from the prompt box (or the last generation)
    styles: object = None  # the Styles multi-select (`webui.ui.prompt_styles`)
    notes: object = None  # what a paste could not set
    # img2img only: the inpaint controls a paste fills (`INPAINT_PASTE_FIELDS` -> widget), as A1111's img2img paste
    inpaint_controls: dict | None = None
    controlnet_units: list = field(default_factory=list)  # the ControlNet units' widgets, `UNIT_FIELDS` per unit
    scripts: object = None  # the Script dropdown and each script's controls (`webui.ui.script_controls`)
    task_box: object = None  # hidden: the task id Generate sends and a reattach reports (`webui.ui.reattach`)
    outputs: list = field(default_factory=list)  # what Generate (and a reattach on page load) updates


def reused_seed(seeds: list, selected: int | None) -> int:
    """The seed "Reuse" puts in the form: the selected gallery image's, else the first image's (-1 if none)."""
    if not seeds:
        return -1
    return seeds[selected] if selected is not None and 0 <= selected < len(seeds) else seeds[0]


def reused_subseed(infotexts: list, selected: int | None) -> int:
    """The variation seed "Reuse" puts in the form: the selected (else first) image's `Variation seed`, -1 if it has
    none. A1111 reads its random variation seed from the job's info even at strength 0, where no image used it;
    an infotext records it only when a variation was drawn, which is when reusing it changes an image."""
    from pipelines.infotext import split_infotext

    if not infotexts:
        return -1
    text = infotexts[selected] if selected is not None and 0 <= selected < len(infotexts) else infotexts[0]
    written = split_infotext(text or "")[2].get("Variation seed", "")
    return int(written) if written.isdigit() else -1


def build_generate_tab(state: ServerState, kind: str, sampler_names: list[str], schedule_names: list[str]) -> GenerateTab:
    """Create the tab's components inside the current `gr.Tab` and wire their events."""
    extra_inputs: list = []
    tab = GenerateTab(kind, None)
    with gr.Row():
        with gr.Column(scale=3):
            if kind == "img2img":
                editor = gr.ImageEditor(label="Image (draw on it to mark the area to inpaint, or to sketch)", type="pil",
                                        image_mode="RGBA", elem_id="img2img_image", brush=gr.Brush(colors=["#ffffff", "#000000", "#ff0000"]),
                                        height=420, format="png")  # an image sent from PNG Info stays lossless
                with gr.Row():
                    mode = gr.Radio(list(IMG2IMG_MODES), value="img2img", label="Mode", elem_id="img2img_mode")
                    # A1111's four (the latent upscale one is refused with a mask by the pipeline, naming why)
                    resize = gr.Dropdown(list(IMG2IMG_RESIZE_MODES), value="just resize", label="Resize mode",
                                         elem_id="img2img_resize_mode")
                with gr.Row():
                    strength = form_slider(0, 1, value=0.75, step=0.01, label="Denoising strength",
                                           elem_id="img2img_denoising_strength")
                    mask_blur = form_slider(0, 64, value=4, step=1, label="Mask blur", elem_id="img2img_mask_blur")
                    image_cfg = tab.image_cfg_scale = build_image_cfg_slider(state)  # instruct-pix2pix models only
                with gr.Accordion("Inpaint", open=True, elem_id="img2img_inpaint_controls"):
                    with gr.Row():
                        fill = gr.Dropdown(list(MASKED_CONTENT), value="original", label="Masked content",
                                           elem_id="img2img_inpainting_fill")
                        mask_mode = gr.Radio(list(MASK_MODES), value=MASK_MODES[0], label="Mask mode",
                                             elem_id="img2img_mask_mode")
                    with gr.Row():
                        only_masked = gr.Checkbox(False, label="Inpaint area: only masked", elem_id="img2img_only_masked")
                        # A1111: 'Only masked padding, pixels', 0..256 step 4, value 32
                        padding = form_slider(0, 256, value=32, step=4, label="Only masked padding, pixels",
                                              elem_id="img2img_inpaint_full_res_padding")
                    with gr.Accordion("Inpaint upload: a mask made elsewhere", open=False):
                        mask_upload = gr.Image(label="Mask (white = repaint, or opaque strokes on a transparent "
                                                     "image); used instead of painted strokes",
                                               type="pil", image_mode=None, format="png", height=200,
                                               elem_id="img2img_mask_upload")
                    soft_inpainting = build_soft_inpainting_controls()
                with gr.Accordion("Outpaint", open=False, elem_id="img2img_outpaint_controls"):
                    with gr.Row():
                        # A1111's "Poor man's outpainting" script: pixels 128, masked content "fill" (its own
                        # control, not the inpaint one), as `pipelines.outpaint.outpaint()` defaults.
                        outpaint_pixels = form_slider(8, 256, value=128, step=8, label="Outpaint: pixels to expand",
                                                      elem_id="img2img_outpaint_pixels")
                        outpaint_fill = gr.Dropdown(list(MASKED_CONTENT), value="fill", label="Outpaint: masked content",
                                                    elem_id="img2img_outpaint_fill")
                    outpaint_sides = gr.CheckboxGroup(list(OUTPAINT_SIDES), value=list(OUTPAINT_SIDES),
                                                      label="Outpaint: directions", elem_id="img2img_outpaint_sides")
                    with gr.Row():
                        # A1111's "Outpainting mk2" script: the border starts from noise matched to the picture;
                        # its Fall-off exponent (0..4, 1) and Color variation (0..1, 0.05) sliders. Mask blur is the
                        # inpaint slider's, blurred 4x as A1111's mk2 does (2x for Poor man's).
                        outpaint_method = gr.Dropdown(list(OUTPAINT_METHODS), value=OUTPAINT_METHODS[0],
                                                      label="Outpaint: method", elem_id="img2img_outpaint_method")
                        outpaint_falloff = form_slider(0, 4, value=1.0, step=0.01,
                                                       label="Outpaint mk2: fall-off exponent (lower=higher detail)",
                                                       elem_id="img2img_outpaint_falloff")
                        outpaint_color_variation = form_slider(0, 1, value=0.05, step=0.01,
                                                               label="Outpaint mk2: color variation",
                                                               elem_id="img2img_outpaint_color_variation")
                named_inputs = {"editor": editor, "mode": mode, "resize_mode": resize, "denoising_strength": strength,
                                "mask_blur": mask_blur, "inpainting_fill": fill, "only_masked": only_masked,
                                "only_masked_padding": padding, "mask_mode": mask_mode, "mask_upload": mask_upload,
                                "outpaint_pixels": outpaint_pixels, "outpaint_fill": outpaint_fill,
                                "outpaint_sides": outpaint_sides, "outpaint_method": outpaint_method,
                                "outpaint_falloff": outpaint_falloff,
                                "outpaint_color_variation": outpaint_color_variation, **soft_inpainting,
                                "image_cfg_scale": image_cfg}
                extra_inputs = [named_inputs[name] for name in IMG2IMG_FIELDS]
                tab.denoising_strength, tab.init_image, tab.mode = strength, editor, mode
                tab.inpaint_controls = {name: named_inputs[name] for name in INPAINT_PASTE_FIELDS}
            widgets = build_generation_widgets(kind, state.limits, sampler_names, schedule_names,
                                               defaults=state.generation_defaults,
                                               clip_skip_default=lambda: state.options.get("CLIP_stop_at_last_layers"))
            tab.widgets = widgets
            if kind == "txt2img":
                from webui.ui.hires_controls import build_hires_controls

                extra_inputs = tab.hires = build_hires_controls(state.limits, state)
            from webui.refiner_config_folders import config_folder_titles
            from webui.ui.refiner_controls import build_refiner_controls

            tab.refiner = build_refiner_controls(kind, state.catalog.titles,
                                                 lambda: config_folder_titles(state.catalog))
            extra_inputs = [*extra_inputs, *tab.refiner]  # the tab's own inputs end with the refiner's
            control_inputs = tab.controlnet_units = build_controlnet_units(
                state, kind, state.options.get("control_net_unit_count"), size_inputs=(widgets.width, widgets.height))
            from webui.ui.script_controls import build_script_controls

            tab.scripts = build_script_controls(kind, state)  # A1111's Script dropdown, at the bottom
        with gr.Column(scale=2):
            with gr.Row():
                generate = gr.Button("Generate", variant="primary", elem_id=f"{kind}_generate", scale=3)
                interrupt = gr.Button("Interrupt", elem_id=f"{kind}_interrupt", scale=1)
                skip = gr.Button("Skip", elem_id=f"{kind}_skip", scale=1)
                tab.paste = gr.Button("\u2199\ufe0f", elem_id=f"{kind}_paste", scale=0, min_width=40)
            if kind == "img2img":  # A1111's Interrogate CLIP and Interrogate DeepBooru, beside the prompt
                from webui.ui.interrogate_button import build_interrogate_button

                build_interrogate_button(state, tab.init_image, widgets.prompt)
            styles_controls = build_styles_controls(state, kind)  # under Generate, as in A1111's top row
            tab.styles = styles_controls.dropdown
            wire_styles_controls(state, styles_controls, widgets.prompt, widgets.negative_prompt)
            tab.notes = gr.Markdown(elem_id=f"{kind}_paste_notes")
            progress = gr.HTML(progress_html(0, "Idle"), elem_id=f"{kind}_progress")
            preview = gr.Image(label="Live preview", type="pil", interactive=False, height=160, elem_id=f"{kind}_preview",
                               visible=True)
            gallery = gr.Gallery(label="Results", columns=2, height=360, format="png", elem_id=f"{kind}_gallery",
                                 interactive=False)
            with gr.Row():
                tab.send_buttons = {target: gr.Button(f"Send to {target}", elem_id=f"{kind}_send_to_{target}", size="sm")
                                    for target in SEND_TARGETS}
            infotext = gr.Textbox(label="Generation parameters", lines=4, interactive=False, elem_id=f"{kind}_infotext")
            gr.Markdown("\u2199\ufe0f fills the form from an infotext pasted into the prompt box, or from the last "
                        "generation when the box is empty.")
    infotexts = gr.State([])
    last_seeds = gr.State([])
    selected = gr.State(None)  # the gallery image the user clicked, for "Reuse" and "Send to"
    tab.gallery, tab.infotexts, tab.selected = gallery, infotexts, selected

    def to_params(values: list):
        form, chosen_styles, own, control_values = split_form_values(values, len(control_inputs))
        return with_controlnet(state, kind, form_params(state, kind, form, chosen_styles, own), control_values)

    def run(request: gr.Request, *values_and_task_id):
        # The session lets this page's Interrupt reach the job at once; the task id (made by the page, kept in its
        # localStorage; the last input, so the form's positional inputs stay as they were for Gradio clients) lets a
        # reloaded page or a second tab reattach to it (`webui.ui.reattach`).
        *values, script_choice, task_id = values_and_task_id
        session = getattr(request, "session_hash", None)
        own_values = split_form_values(list(values), len(control_inputs))[2]
        img2img_values = dict(zip(IMG2IMG_FIELDS, own_values)) if kind == "img2img" else {}  # refiner's come after
        outpainting = img2img_values.get("mode") == "outpaint"
        params = None

        def as_picked(message: str) -> str:  # the checks quote the config folder's server path: the dropdown's name
            return named_as_picked(message, getattr(params, "refiner_config_dir", None),
                                   picked_config_folder(own_values))
        try:
            task_id = checked_task_id(state, task_id)  # none: a Gradio client, not the page
            params = replace(to_params(list(values)), user=page_owner(request))  # the infotext's `User`
            if outpainting and getattr(params, "controlnets", None):
                raise ValueError("Outpaint mode does not take a ControlNet unit here; disable the unit.")
            if not outpainting:
                state.check_params(kind, params)  # outpaint is checked at its extended size when submitted
            script = selected_script(state, kind, script_choice, params, outpainting)
        except (ValueError, TypeError, KeyError) as error:
            message = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
            raise refused(as_picked(message)) from None
        resize_note = seed_resize_off_note(params.seed_resize_from_w, params.seed_resize_from_h)
        if resize_note:  # taken, as A1111 takes it, but the user set a side that changes nothing
            show_warning(resize_note, state)
        save = bool(state.options.get("samples_save"))
        try:
            if script is not None:
                job = state.submit_script(kind, params, *script, save=save, grid_save=bool(state.options.get("grid_save")),
                                          session=session, keep_on_disconnect=True)
            elif outpainting:
                sides, mk2 = outpaint_request(params.init_images[0], img2img_values)
                if mk2 is not None:  # mk2 always paints from its matched noise, as A1111's sets inpainting_fill 1
                    params = replace(params, inpainting_fill="original")
                job = state.submit_outpaint(params, sides, mk2=mk2, save=save, session=session,
                                            keep_on_disconnect=True)
            else:
                job = state.submit_generation(kind, params, save=save, session=session, keep_on_disconnect=True)
        except (ValueError, TypeError) as error:
            raise refused(as_picked(str(error))) from None
        except QueueFullError as error:
            show_warning("Queue full: " + str(error), state)
            yield progress_html(0, "Queue full - try again in a moment"), None, *[gr.skip()] * 6
            return
        task = registered_task(state, task_id, kind, job, request,
                               lambda outcome: gallery_result(state, outcome, gallery.GRADIO_CACHE))
        yield from follow_task(state, task)

    task_box = task_box_for(kind)  # the task the tab follows (`webui.ui.reattach`)
    generate_inputs = [*widgets.inputs(), tab.styles, *extra_inputs, *control_inputs, tab.scripts.choice, task_box]
    tab.outputs = [progress, preview, gallery, infotext, infotexts, last_seeds, selected, task_box]
    tab.task_box = task_box
    generate.click(run, inputs=generate_inputs, outputs=tab.outputs, concurrency_limit=None,
                   js=submit_js(len(generate_inputs)))

    # Only the caller's own job: the queue is shared by every session (and `--listen --auth` users), so a
    # button must never stop what another tab started. A1111's flag is global because it serves one user.
    # The page sends the task it follows, which reaches a job started before a reload (another session).
    def interrupt_own_job(request: gr.Request, task_box: str = "") -> None:
        state.interrupt_session(getattr(request, "session_hash", None))
        state.tasks.interrupt(followed_task_id(task_box), page_owner(request))

    def skip_own_batch(request: gr.Request, task_box: str = "") -> None:
        if not state.skip_session(getattr(request, "session_hash", None)):
            state.tasks.skip(followed_task_id(task_box), page_owner(request))

    interrupt.click(interrupt_own_job, inputs=[task_box], queue=False)
    skip.click(skip_own_batch, inputs=[task_box], queue=False)
    widgets.seed_dice.click(lambda: -1, outputs=widgets.seed, queue=False)
    widgets.seed_recycle.click(reused_seed, inputs=[last_seeds, selected], outputs=widgets.seed, queue=False)
    widgets.subseed_dice.click(lambda: -1, outputs=widgets.subseed, queue=False)
    widgets.subseed_recycle.click(reused_subseed, inputs=[infotexts, selected], outputs=widgets.subseed, queue=False)

    def show_infotext(texts: list, event: gr.SelectData):
        if texts and isinstance(event.index, int) and 0 <= event.index < len(texts):
            return texts[event.index], event.index
        return "", None

    gallery.select(show_infotext, inputs=infotexts, outputs=[infotext, selected], queue=False)
    return tab


def selected_script(state: ServerState, kind: str, chosen, params, outpainting: bool):
    """(script, checked config) for the Script dropdown's choice ([title, script_args] or None, `ScriptControls.choice`),
    or None for "None"; ValueError as the API's."""
    if not chosen:
        return None
    if outpainting:
        raise ValueError("Outpaint mode runs its own outpainting script; set Script to None, or leave Outpaint mode.")
    from webui.api_selectable_scripts import request_script

    return request_script(state, kind, chosen[0], chosen[1], params)


def split_form_values(values: list, control_count: int) -> tuple[list, list[str], list, list]:
    """Generate's inputs (generation widgets, Styles, the tab's own: Hires. fix or img2img, ControlNet units) split
    into (generation widget values, chosen styles, own values, ControlNet values)."""
    count = len(GenerationWidgets.FIELDS)
    own_end = len(values) - control_count
    return values[:count], list(values[count] or []), values[count + 1:own_end], values[own_end:]


def picked_config_folder(own: list) -> str | None:
    """The Refiner accordion's Config folder as the user picked it (its dropdown title), None when the accordion is
    off; `own` ends with the accordion's values (`REFINER_FIELDS`)."""
    from webui.ui.refiner_controls import REFINER_FIELDS

    fields = dict(zip(REFINER_FIELDS, own[len(own) - len(REFINER_FIELDS):]))
    return fields["refiner_config_dir"] if fields["enable_refiner"] else None


def form_params(state: ServerState, kind: str, form: list, chosen_styles: list[str], own: list):
    """The params a form makes, with the Settings an API request also gets and the styles merged as the API merges
    them: NGMS / Skip Early CFG (Settings > Optimizations), eta / ENSD (Settings > Sampler parameters), emphasis and
    comma_padding_backtrack (Settings > Stable Diffusion) and what the infotext tells (Settings > Infotext) are
    Settings here, as in A1111, not form fields. `own` ends with the Refiner accordion's values (`REFINER_FIELDS`)."""
    from webui.ui.refiner_controls import REFINER_FIELDS, with_refiner

    own, refiner = own[:len(own) - len(REFINER_FIELDS)], own[len(own) - len(REFINER_FIELDS):]
    return with_refiner(_form_params(state, kind, form, chosen_styles, own), refiner, state.catalog)


def _form_params(state: ServerState, kind: str, form: list, chosen_styles: list[str], own: list):
    """`form_params` without the refiner: `own` holds the Hires. fix (txt2img) or img2img widgets' values."""
    from webui.options import HIRES_REFINER_PASS_KEY, TOME_HR_KEY

    unstyled = values_to_params(form)
    params = replace(unstyled, **state.options.uncond_skip(), **state.options.sampler_params(unstyled.sampler),
                     **state.options.prompt_options(), infotext_options=state.options.infotext_options(),
                     restore_faces=state.options.get("face_restoration"))  # A1111 1.7+: a Setting, not a form field
    library = read_styles(state) if chosen_styles else None
    params = styled_params(params, chosen_styles, library)
    if kind == "txt2img":
        from webui.ui.hires_controls import with_hires

        hires = with_hires(params, own, state.limits, styles=library, style_names=chosen_styles,
                           unstyled_prompts=(unstyled.prompt, unstyled.negative_prompt),
                           hires_eta=lambda sampler: state.options.sampler_params(sampler)["eta"])
        extra_noise = state.options.get("img2img_extra_noise")
        if hires is not params and extra_noise > 0:  # A1111 adds it in its hires pass too; this server's does not
            from webui.ui.errors import refused

            raise refused(f"Settings > img2img 'Extra noise' is {extra_noise}: A1111 adds it in the hires-fix pass, "
                          "which this server does not; set it to 0 for txt2img with hires fix.")
        if hires is not params:  # Settings > Stable Diffusion "Hires fix: which pass to enable refiner for"
            hires = replace(hires, hires_fix_refiner_pass=state.options.get(HIRES_REFINER_PASS_KEY),
                            # Settings > Optimizations "Token merging ratio for high-res pass"
                            token_merging_ratio_hr=state.options.get(TOME_HR_KEY))
        return hires
    # A1111's Settings "With img2img, do exactly the amount of steps the slider specifies" (img2img_fix_steps), and
    # its img2img noise settings (pipelines.img2img_noise)
    from webui.options import img2img_color_correction, img2img_noise_values

    return replace(img2img_params(params, dict(zip(IMG2IMG_FIELDS, own)), warn=lambda text: show_warning(text, state)),
                   exact_steps=bool(state.options.get("img2img_fix_steps")),
                   **img2img_color_correction(state.options.sampler_options()),
                   **img2img_noise_values(state.options.sampler_options()))


def _form_fields(tab: GenerateTab) -> list[tuple[str, object]]:
    """(value name, widget) for every field a paste can fill: the generation widgets, then img2img's denoising
    strength and inpaint controls or txt2img's Hires. fix widgets (whose "denoising_strength" is the second pass's),
    the refiner, the ControlNet units, and the Script dropdown with the X/Y/Z plot's axes."""
    fields = list(zip(GenerationWidgets.FIELDS, tab.widgets.inputs()))
    if tab.denoising_strength is not None:
        fields.append(("denoising_strength", tab.denoising_strength))
    if tab.image_cfg_scale is not None:
        fields.append(("image_cfg_scale", tab.image_cfg_scale))
    if tab.inpaint_controls is not None:
        fields += list(tab.inpaint_controls.items())
    if tab.hires is not None:
        from webui.ui.hires_controls import HIRES_FIELDS

        fields += list(zip(HIRES_FIELDS, tab.hires))
    from webui.ui.refiner_controls import REFINER_FIELDS

    fields += list(zip(REFINER_FIELDS, tab.refiner))
    from webui.ui.paste_script_values import script_form_fields

    return fields + controlnet_form_fields(tab.controlnet_units) + script_form_fields(tab.scripts)


def controlnet_unit_count(tab: GenerateTab) -> int:
    """How many ControlNet units the tab has (0 without a ControlNet folder)."""
    from webui.ui.controlnet_units import UNIT_FIELDS

    return len(tab.controlnet_units) // len(UNIT_FIELDS)


def controlnet_form_fields(unit_widgets: list) -> list[tuple[str, object]]:
    """(value name, widget) for the ControlNet unit fields a paste fills ("controlnet_0_weight", ...): every field
    but the image, as sd-webui-controlnet registers its paste fields (scripts/infotext.py)."""
    from webui.ui.controlnet_units import UNIT_FIELDS
    from webui.ui.paste_infotext import CONTROLNET_PASTE_FIELDS, controlnet_field

    pasted = {"enabled", *CONTROLNET_PASTE_FIELDS}
    width = len(UNIT_FIELDS)
    return [(controlnet_field(start // width, name), widget)
            for start in range(0, len(unit_widgets), width)
            for name, widget in zip(UNIT_FIELDS, unit_widgets[start:start + width]) if name in pasted]


def apply_form_values(tab: GenerateTab, values: dict) -> list:
    """Gradio updates for every form field, in `form_outputs(tab)` order; fields not in `values` are kept."""
    return [gr.update(value=values[name]) if name in values else gr.skip() for name, _ in _form_fields(tab)]


def form_outputs(tab: GenerateTab) -> list:
    return [widget for _, widget in _form_fields(tab)]

