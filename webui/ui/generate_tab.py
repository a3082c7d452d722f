"""The txt2img and img2img tabs: form, Generate/Interrupt/Skip, live progress with previews, gallery.

The handler validates with the same checks as the API (`ServerState.check_params`), queues the
job on the shared worker and polls its progress, so UI and API users wait in one queue.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass

import gradio as gr

from webui.server_state import ServerState
from webui.ui.controlnet_units import build_controlnet_units, controlnet_enabled, with_controlnet
from webui.ui.errors import failed, refused
from webui.ui.widgets import GenerationWidgets, build_generation_widgets, values_to_params
from webui.worker import QueueFullError

POLL_SECONDS = 0.4
IMG2IMG_MODES = ("img2img", "inpaint", "sketch", "outpaint")
OUTPAINT_SIDES = ("left", "right", "up", "down")


def progress_html(fraction: float, text: str) -> str:
    percent = max(0.0, min(1.0, fraction)) * 100
    return (f'<div class="mixkit-progress"><div class="mixkit-progress-bar" style="width:{percent:.1f}%"></div></div>'
            f'<div class="mixkit-progress-text">{html.escape(text)}</div>')


def status_text(state: ServerState, job) -> tuple[float, str]:
    """(fraction, "Step 3/20, batch 1/2, ETA 4s") for `job`, or its place in the queue."""
    snapshot = state.worker.progress()
    if snapshot.job_number != job.number:
        ahead = state.worker.jobs_ahead(job)  # the job itself is not counted (it used to read "1 job(s) queued")
        return 0.0, (f"Waiting in queue ({ahead} job(s) ahead)" if ahead else "Starting...")
    if not snapshot.total_steps:
        return 0.0, "Starting..."
    return snapshot.fraction, (f"Step {snapshot.step}/{snapshot.total_steps}, batch {snapshot.batch_index + 1}/"
                               f"{snapshot.batch_count}, ETA {snapshot.eta_seconds:.0f}s")


def editor_mask(layers: list):
    """An L-mode mask (255 = repaint) from the editor's drawn layers: every painted pixel counts."""
    from PIL import ImageChops

    mask = None
    for layer in layers or []:
        alpha = layer.convert("RGBA").getchannel("A").point(lambda v: 255 if v > 0 else 0)
        mask = alpha if mask is None else ImageChops.lighter(mask, alpha)
    if mask is None or mask.getbbox() is None:
        return None
    return mask


def outpaint_sides_from(pixels: int, directions: list[str]) -> dict[str, int]:
    """A1111's outpaint directions (left/right/up/down) -> pixels per side for `pipelines.outpaint`."""
    unknown = sorted(set(directions) - set(OUTPAINT_SIDES))
    if unknown or not directions:
        raise ValueError(f"Choose outpaint directions among {', '.join(OUTPAINT_SIDES)}; got {directions!r}.")
    return {"left": pixels * ("left" in directions), "right": pixels * ("right" in directions),
            "top": pixels * ("up" in directions), "bottom": pixels * ("down" in directions)}


@dataclass
class GenerateTab:
    kind: str
    widgets: GenerationWidgets
    denoising_strength: object = None  # img2img only
    init_image: object = None  # img2img only: the editor PNG Info sends its image to
    hires: list | None = None  # txt2img only: the Hires. fix widgets, in `HIRES_FIELDS` order


def reused_seed(seeds: list, selected: int | None) -> int:
    """The seed "Reuse" puts in the form: the selected gallery image's, else the first image's (-1 if none)."""
    if not seeds:
        return -1
    return seeds[selected] if selected is not None and 0 <= selected < len(seeds) else seeds[0]


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
                    resize = gr.Dropdown(["just resize", "crop and resize", "resize and fill"], value="just resize",
                                         label="Resize mode")
                with gr.Row():
                    strength = gr.Slider(0, 1, value=0.75, step=0.01, label="Denoising strength", elem_id="img2img_denoising_strength")
                    mask_blur = gr.Slider(0, 64, value=4, step=1, label="Mask blur")
                with gr.Row():
                    fill = gr.Dropdown(["original", "fill", "latent noise", "latent nothing"], value="original",
                                       label="Masked content")
                    only_masked = gr.Checkbox(False, label="Inpaint area: only masked")
                with gr.Row():
                    outpaint_pixels = gr.Slider(8, 256, value=64, step=8, label="Outpaint: pixels to expand",
                                                elem_id="img2img_outpaint_pixels")
                    outpaint_sides = gr.CheckboxGroup(list(OUTPAINT_SIDES), value=list(OUTPAINT_SIDES),
                                                      label="Outpaint: directions", elem_id="img2img_outpaint_sides")
                extra_inputs = [editor, mode, resize, strength, mask_blur, fill, only_masked, outpaint_pixels, outpaint_sides]
                tab.denoising_strength, tab.init_image = strength, editor
            widgets = build_generation_widgets(kind, state.limits, sampler_names, schedule_names,
                                               defaults=state.generation_defaults)
            tab.widgets = widgets
            if kind == "txt2img":
                from webui.ui.hires_controls import build_hires_controls

                extra_inputs = tab.hires = build_hires_controls(state.limits)
            control_inputs = build_controlnet_units(state, kind, state.options.get("control_net_unit_count"))
        with gr.Column(scale=2):
            with gr.Row():
                generate = gr.Button("Generate", variant="primary", elem_id=f"{kind}_generate", scale=3)
                interrupt = gr.Button("Interrupt", elem_id=f"{kind}_interrupt", scale=1)
                skip = gr.Button("Skip", elem_id=f"{kind}_skip", scale=1)
            progress = gr.HTML(progress_html(0, "Idle"), elem_id=f"{kind}_progress")
            preview = gr.Image(label="Live preview", type="pil", interactive=False, height=160, elem_id=f"{kind}_preview",
                               visible=True)
            gallery = gr.Gallery(label="Results", columns=2, height=360, format="png", elem_id=f"{kind}_gallery",
                                 interactive=False)
            infotext = gr.Textbox(label="Generation parameters", lines=4, interactive=False, elem_id=f"{kind}_infotext")
    infotexts = gr.State([])
    last_seeds = gr.State([])
    selected = gr.State(None)  # the gallery image the user clicked, for "Reuse"

    def to_params(values: list):
        control_values, values = values[-len(control_inputs):] if control_inputs else [], \
            values[:len(values) - len(control_inputs)]
        params = _base_params(values)
        if control_values and controlnet_enabled(control_values) and hasattr(params, "hr_scale"):
            raise ValueError("Hires fix together with ControlNet is not supported; turn one of them off.")
        return with_controlnet(state, kind, params, control_values)

    def _base_params(values: list):
        from dataclasses import replace

        # NGMS / Skip Early CFG are Settings here, as in A1111 (Settings > Optimizations), not form fields.
        # eta and ENSD too (Settings > Sampler parameters).
        params = values_to_params(values[:len(GenerationWidgets.FIELDS)])
        params = replace(params, **state.options.uncond_skip(), **state.options.sampler_params(params.sampler))
        if kind == "txt2img":
            from webui.ui.hires_controls import with_hires

            return with_hires(params, values[len(GenerationWidgets.FIELDS):], state.limits)
        from pipelines.img2img import Img2ImgParams

        editor_value, mode, resize, strength, blur, fill, only, _pixels, _sides = values[len(GenerationWidgets.FIELDS):]
        if not editor_value or editor_value.get("background") is None:
            raise ValueError("Drop an image into the img2img editor first.")
        from pipelines.image_prep import normalize_init_image

        background = normalize_init_image(editor_value["background"])  # transparency on white, as A1111
        mask = editor_mask(editor_value.get("layers")) if mode == "inpaint" else None
        if mode == "inpaint" and mask is None:
            raise ValueError("Inpaint mode needs a mask: paint over the area to repaint.")
        init = editor_value["composite"].convert("RGB") if mode == "sketch" else background
        return Img2ImgParams(**vars(params), init_images=[init], denoising_strength=float(strength), resize_mode=resize,
                             mask=mask, mask_blur=int(blur), inpainting_fill=fill, inpaint_full_res=bool(only))

    def run(request: gr.Request, *values):
        session = getattr(request, "session_hash", None)  # ties the job to this tab: closing it cancels the job
        base_values = list(values[:len(values) - len(control_inputs)])
        outpainting = kind == "img2img" and base_values[len(GenerationWidgets.FIELDS) + 1] == "outpaint"
        try:
            params = to_params(list(values))
            if outpainting and getattr(params, "controlnets", None):
                raise ValueError("Outpaint mode does not take a ControlNet unit here; disable the unit.")
            if not outpainting:
                state.check_params(kind, params)  # outpaint is checked at its extended size when submitted
        except (ValueError, TypeError, KeyError) as error:
            message = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
            raise refused(message) from None
        save = bool(state.options.get("samples_save"))
        try:
            if outpainting:
                pixels, sides = int(base_values[-2]), base_values[-1] or []
                job = state.submit_outpaint(params, outpaint_sides_from(pixels, sides), save=save, session=session)
            else:
                job = state.submit_generation(kind, params, save=save, session=session)
        except (ValueError, TypeError) as error:
            raise refused(str(error)) from None
        except QueueFullError as error:
            gr.Warning("Queue full: " + str(error))
            yield progress_html(0, "Queue full - try again in a moment"), None, *[gr.skip()] * 5
            return
        started = time.monotonic()
        while not job.future.done():
            fraction, text = status_text(state, job)
            preview_image = state.current_preview() if state.options.get("live_previews_enable") and fraction else None
            yield progress_html(fraction, text), preview_image, *[gr.skip()] * 5
            time.sleep(POLL_SECONDS)
        if job.future.cancelled():  # the tab's session ended while the job waited
            return
        try:
            outcome = job.future.result()
        except Exception as error:  # a LoRA that does not fit, a model that failed: show it, keep the UI alive
            raise failed(f"Generation failed: {error}", error) from None
        result = outcome.result
        if outcome.saved:
            paths = [str(path) for path in outcome.saved]
        else:
            from webui.ui.gallery_files import gallery_pngs

            paths = gallery_pngs(result.images, result.seeds, result.infotexts, gallery.GRADIO_CACHE)
        label = "Interrupted" if result.interrupted else "Done"
        done = progress_html(1.0, f"{label}: {len(result.images)} image(s) in {time.monotonic() - started:.1f}s")
        yield (done, None, [(path, None) for path in paths], (result.infotexts[0] if result.infotexts else ""),
               list(result.infotexts), list(result.seeds), None)

    generate.click(run, inputs=widgets.inputs() + extra_inputs + control_inputs,
                   outputs=[progress, preview, gallery, infotext, infotexts, last_seeds, selected], concurrency_limit=None)
    interrupt.click(lambda: state.worker.interrupt() and None, queue=False)
    skip.click(lambda: state.worker.skip() and None, queue=False)
    widgets.seed_dice.click(lambda: -1, outputs=widgets.seed, queue=False)
    widgets.seed_recycle.click(reused_seed, inputs=[last_seeds, selected], outputs=widgets.seed, queue=False)

    def show_infotext(texts: list, event: gr.SelectData):
        if texts and isinstance(event.index, int) and 0 <= event.index < len(texts):
            return texts[event.index], event.index
        return "", None

    gallery.select(show_infotext, inputs=infotexts, outputs=[infotext, selected], queue=False)
    return tab


def _form_fields(tab: GenerateTab) -> list[tuple[str, object]]:
    """(value name, widget) for every field a paste can fill: the generation widgets, then img2img's denoising
    strength or txt2img's Hires. fix widgets (whose "denoising_strength" is the second pass's)."""
    fields = list(zip(GenerationWidgets.FIELDS, tab.widgets.inputs()))
    if tab.denoising_strength is not None:
        fields.append(("denoising_strength", tab.denoising_strength))
    if tab.hires is not None:
        from webui.ui.hires_controls import HIRES_FIELDS

        fields += list(zip(HIRES_FIELDS, tab.hires))
    return fields


def apply_form_values(tab: GenerateTab, values: dict) -> list:
    """Gradio updates for every form field, in `form_outputs(tab)` order; fields not in `values` are kept."""
    return [gr.update(value=values[name]) if name in values else gr.skip() for name, _ in _form_fields(tab)]


def form_outputs(tab: GenerateTab) -> list:
    return [widget for _, widget in _form_fields(tab)]

