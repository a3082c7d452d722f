"""Extras: upscale one image or a batch of files with a named upscaler, through the same queue and limits as the API.

The controls are A1111's (modules/ui_postprocessing.py, scripts/postprocessing_upscale.py): a single image or a
"Batch Process" of uploaded files, and "Scale by" (a factor) or "Scale to" (width x height, "Crop to fit"). The
form's values become the API's own `ExtrasBaseRequest`, and the size, the crop and the postprocessing text come
from the functions `/sdapi/v1/extra-single-image` and `/extra-batch-images` use (`webui.api_extras`), so the UI and
the API give the same file. Each result carries the source's text chunks plus `postprocessing`, is saved to the
output folder when "Save generated images" is on (as A1111's Extras saves), and its postprocessing text is shown.
The GFPGAN / CodeFormer sliders are A1111's Extras face restoration, run in the same job after the upscale (0: off),
then A1111's training-data accordions (`webui.ui.extras_training_controls`), which may make several images of one.
An upscale (single or batch) is one queued job that goes on when its page goes away: a reloaded page follows it by
its task id and shows its result (`webui.ui.extras_task`).
A1111's "Batch from Directory" (folders on the server's disk) is not offered: a shared server's UI users must not
read or write its folders.
"""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState
from webui.ui.errors import refused
from webui.ui.extras_task import extras_finish, follow_extras
from webui.ui.extras_training_controls import training_controls, training_job_step, training_steps_from_form
from webui.ui.form_components import form_slider
from webui.ui.progress_view import progress_html
from webui.ui.reattach import (FollowedTab, checked_task_id, interrupt_own_job, registered_task, submit_js,
                               task_box_for)
from webui.ui.upscaler_refresh import add_upscaler_refresh
from webui.worker import QueueFullError

SCALE_BY, SCALE_TO = 0, 1  # the API's resize_mode values (`webui.api_extras`)
RESIZE_MODES = ("Scale by", "Scale to")  # A1111's Extras resize tabs, in resize_mode order


def extras_request(resize_mode: int, factor: float, width: int, height: int, crop: bool, upscaler: str,
                   gfpgan_visibility: float = 0.0, codeformer_visibility: float = 0.0, codeformer_weight: float = 0.0):
    """The Extras form's values as the API's request model, checked as the API checks it (ValueError naming the
    field); the UI has no second upscaler, so only these fields are set."""
    from webui.api_extras import check_extras_request
    from webui.api_requests import ExtrasBaseRequest

    body = ExtrasBaseRequest(resize_mode=int(resize_mode), upscaling_resize=float(factor),
                             upscaling_resize_w=int(width), upscaling_resize_h=int(height), upscaling_crop=bool(crop),
                             upscaler_1=upscaler, gfpgan_visibility=float(gfpgan_visibility),
                             codeformer_visibility=float(codeformer_visibility),
                             codeformer_weight=float(codeformer_weight))
    check_extras_request(body)
    return body


def build_extras_tab(state: ServerState) -> tuple[gr.Image, FollowedTab]:
    """Create the tab; returns its source image component (the target of the "Send to extras" buttons) and what a
    loading page needs to follow its upscale."""
    from pipelines.upscale import UPSCALERS, UpscaleLimits

    with gr.Row():
        with gr.Column():
            # PNG, as A1111 sends the gallery PNG: Gradio's default WebP would re-encode a sent image lossily and drop
            # its `parameters` chunk, which the result must keep (`extras_chunks`).
            source = gr.Image(label="Image", type="pil", image_mode="RGB", format="png", elem_id="extras_image")
            with gr.Row():
                run = gr.Button("Upscale", variant="primary", elem_id="extras_generate", scale=3)
                # stops the upscale (or batch) the tab follows, also one started before a reload
                interrupt = gr.Button("Interrupt", elem_id="extras_interrupt", scale=1)
            with gr.Accordion("Batch Process", open=False, elem_id="extras_batch"):
                files = gr.File(label="Images", file_count="multiple", file_types=["image"], type="filepath",
                                elem_id="extras_batch_files")
                run_batch = gr.Button("Upscale all", variant="primary", elem_id="extras_batch_generate")
            with gr.Row():
                upscaler = gr.Dropdown(UPSCALERS.names(), value=UPSCALERS.names()[0], label="Upscaler",
                                       elem_id="extras_upscaler", scale=4)
                add_upscaler_refresh(state, upscaler, UPSCALERS.names, elem_id="extras_refresh_upscalers")
            # A1111's "Scale by" / "Scale to" tabs, as a radio whose index is the API's resize_mode (a radio rather
            # than nested tabs: the page's tabs stay the top-level ones)
            resize_mode = gr.Radio(list(RESIZE_MODES), value=RESIZE_MODES[SCALE_BY], type="index", label="Resize",
                                   elem_id="extras_resize_mode")
            scale = form_slider(1, UpscaleLimits().max_scale, value=2, step=0.05, label="Scale by", elem_id="extras_scale")
            with gr.Row():  # A1111's "Scale to" sliders: 64..8192, step 8, 512 x 512, "Crop to fit" on
                width = form_slider(64, 8192, value=512, step=8, label="Width", elem_id="extras_upscaling_resize_w")
                height = form_slider(64, 8192, value=512, step=8, label="Height", elem_id="extras_upscaling_resize_h")
                crop = gr.Checkbox(True, label="Crop to fit", elem_id="extras_upscaling_crop")
            # A1111's GFPGAN and CodeFormer Extras scripts (run after the upscale; 0 visibility: off)
            with gr.Row():
                gfpgan = form_slider(0, 1, value=0, step=0.001, label="GFPGAN visibility",
                                     elem_id="extras_gfpgan_visibility")
                codeformer = form_slider(0, 1, value=0, step=0.001, label="CodeFormer visibility",
                                         elem_id="extras_codeformer_visibility")
                codeformer_weight = form_slider(0, 1, value=0, step=0.001,
                                                label="CodeFormer weight (0 = maximum effect, 1 = minimum effect)",
                                                elem_id="extras_codeformer_weight")
            training = training_controls(state)
        with gr.Column():
            progress = gr.HTML(progress_html(0, "Idle"), elem_id="extras_progress")
            result = gr.Image(label="Result", type="pil", format="png", interactive=False, elem_id="extras_result")
            batch_result = gr.Gallery(label="Batch results", format="png", interactive=False, elem_id="extras_batch_result")
            size = gr.Markdown(elem_id="extras_size")
            info = gr.Textbox(label="Postprocessing", interactive=False, elem_id="extras_info")
            task_box = task_box_for("extras")

    def run_upscale(sources: list, body, steps, task_id, request, *, batch: bool):
        """Queue the upscale of `sources` (read as the API reads them) as one job and follow it as a task: the job goes
        on when the page goes away, and the task id (made by the page, the input after CodeFormer weight) lets a
        reloaded page follow it."""
        from pipelines.extras_training import picture_suffixes, target_size
        from webui.api_extras import SCALE_TO, extras_faces, extras_postprocess, size_after_upscale, upscale_factor
        from webui.interrogation import interrogation_models_held  # Caption's DeepBooru loads once per batch

        try:
            task_id = checked_task_id(state, task_id)
            pixels = [as_api_pixels(image, state.limits.max_pixels * 4) for image in sources]
            factors = [upscale_factor(body, image.width, image.height) for image in pixels]
            after = extras_postprocess(body, extras_faces(body), unload=state.options.get("face_restoration_unload"))
            if steps.active:  # A1111's target size per source: the "Scale to" size or the "Scale by" size
                scale_to = (body.upscaling_resize_w, body.upscaling_resize_h) if body.resize_mode == SCALE_TO else None
                targets = [target_size(p.width, p.height, scale_to=scale_to, scale_by=body.upscaling_resize)
                           for p in pixels]
                for number, (image, factor, target) in enumerate(zip(pixels, factors, targets), 1):
                    try:  # the focal crop's / split's resize budget, known now: refused before anything is queued
                        picture_suffixes(*size_after_upscale(body, image.width, image.height, factor), steps, target)
                    except ValueError as error:
                        raise ValueError(f"image {number} of {len(pixels)}: {error}" if batch else str(error)) from None
                after = training_job_step(state, body, steps, targets, after)
            job = state.submit_upscale_batch(pixels, factors, body.upscaler_1, keep_on_disconnect=True,
                                             session=getattr(request, "session_hash", None), after=after,
                                             held=lambda: interrogation_models_held(state))
        except (ValueError, TypeError, QueueFullError) as error:  # limits, bad name, queue full: tell the user
            raise refused(str(error)) from None
        finish = extras_finish(state, sources, pixels, body, result.GRADIO_CACHE, batch=batch)
        yield from follow_extras(state, registered_task(state, task_id, "extras", job, request, finish))

    def checked_request(*form):
        try:
            return extras_request(*form)
        except (ValueError, TypeError) as error:
            raise refused(str(error)) from None

    def checked_steps(form):
        from pipelines.extras_training import TrainingSteps

        if not form:  # a client sending only the endpoint's first inputs: no training step
            return TrainingSteps()
        try:
            return training_steps_from_form(*form)
        except (ValueError, TypeError) as error:
            raise refused(str(error)) from None

    # The training accordions' values come after the task id and the request (Gradio puts the request where the
    # signature has it), so the endpoint's first inputs stay as they were for existing clients; all default to off.
    def upscale(image, name: str, factor: float, mode: int, w: int, h: int, crop_to_fit: bool, gfpgan_value: float,
                codeformer_value: float, weight: float, task_id: str, request: gr.Request, *training_values):
        if image is None:
            raise refused("Drop an image to upscale first.")
        body = checked_request(mode, factor, w, h, crop_to_fit, name, gfpgan_value, codeformer_value, weight)
        steps = checked_steps(training_values)
        yield from run_upscale([image], body, steps, task_id, request, batch=False)

    def upscale_batch(paths: list | None, name: str, factor: float, mode: int, w: int, h: int, crop_to_fit: bool,
                      gfpgan_value: float, codeformer_value: float, weight: float, task_id: str, request: gr.Request,
                      *training_values):
        """A1111's "Batch Process": every file, in order; all are read and checked before the first is queued."""
        from pipelines.upscale import check_upscale
        from webui.api_extras import upscale_factor
        from webui.ui.png_info_tab import read_upload_image

        if not paths:
            raise refused("Drop one or more images to upscale first.")
        body = checked_request(mode, factor, w, h, crop_to_fit, name, gfpgan_value, codeformer_value, weight)
        steps = checked_steps(training_values)
        images = []
        for path in paths:
            try:
                image = read_upload_image(str(path), state.limits.max_pixels * 4)
                pixels = as_api_pixels(image, state.limits.max_pixels * 4)
                # the checks `submit_upscale` makes, for every file before the first is queued
                UPSCALERS.get(body.upscaler_1)
                check_upscale(pixels.width, pixels.height, upscale_factor(body, pixels.width, pixels.height),
                              UpscaleLimits(), body.upscaler_1)
            except ValueError as error:
                raise refused(f"{_file_name(path)}: {error}") from None
            images.append(image)
        yield from run_upscale(images, body, steps, task_id, request, batch=True)

    settings = [upscaler, scale, resize_mode, width, height, crop, gfpgan, codeformer, codeformer_weight]
    outputs = [progress, result, batch_result, size, info, task_box]
    js = task_id_js(len(settings) + 1, len(settings) + 2 + len(training))
    run.click(upscale, inputs=[source, *settings, task_box, *training], outputs=outputs, concurrency_limit=None, js=js)
    run_batch.click(upscale_batch, inputs=[files, *settings, task_box, *training], outputs=outputs,
                    concurrency_limit=None, js=js)
    interrupt.click(interrupt_own_job(state), inputs=[task_box], queue=False)
    return source, FollowedTab("extras", task_box, outputs, lambda task: follow_extras(state, task))


def task_id_js(task_index: int, input_count: int) -> str:
    """`webui.ui.reattach.submit_js` for a task box that is not the last input: the new task id goes at
    `task_index` of the `input_count` inputs (the training accordions follow the task box)."""
    last = submit_js(task_index + 1)  # the id made as everywhere, then the inputs after the task box put back
    ending = f"return [...values.slice(0, {task_index}), id];"
    if ending not in last:
        raise RuntimeError("webui.ui.reattach.submit_js changed its form; update task_id_js to match it")
    return last.replace(ending, f"return [...values.slice(0, {task_index}), id, ...values.slice({task_index + 1}, "
                                f"{input_count})];")


def as_api_pixels(image, max_pixels: int):
    """The picture as the API reads an upload (`mixkit.io.images.load_image`: EXIF orientation applied,
    transparency on white, 16-bit scaled to 8-bit), so the Extras tab and `/sdapi/v1/extra-*` upscale the same
    pixels; the text chunks stay on `image` (the result's chunks are taken from there)."""
    from mixkit.io.images import load_image

    return load_image(image, max_pixels=max_pixels)


def _file_name(path) -> str:
    from pathlib import Path

    return Path(str(path)).name
