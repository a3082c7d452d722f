"""Checkpoint Merger: A1111's tab (modules/ui_checkpoint_merger.py) over `mixkit.io.merge_checkpoints`.

The models are chosen from the server's checkpoint list (single files; a diffusers folder is refused with advice),
the VAE to bake in from its VAE list, and the result is written into the models folder (`--models-dir`, A1111's
`--ckpt-dir`), so a client never names a server path. The merge is a job in the server's queue, like a generation
(progress shows here and in `/sdapi/v1/progress`; Interrupt stops it before anything is written), and a UI task: it
goes on when the page reloads, and the reloaded page follows it and shows how it ended (`webui.ui.merger_task`).
When it ends the checkpoint list is refreshed, so the new file is in the A/B/C dropdowns, in Settings' checkpoint
list, in txt2img's and img2img's Refiner checkpoint lists (no refresh button needed, as A1111) and in
`/sdapi/v1/sd-models`. All bounds are the Python API's; this file translates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from webui.server_state import ServerState
from webui.ui.errors import refused
from webui.ui.merger_task import KIND, CheckpointList, follow_merge, refreshed_lists
from webui.ui.page_values import serve_props
from webui.ui.progress_view import progress_html
from webui.ui.reattach import (FollowedTab, checked_task_id, interrupt_own_job, page_owner, registered_task, submit_js,
                               task_box_for)
from webui.worker import QueueFullError

JOB_NAME = "model-merge"  # A1111's shared.state job name for a merge
NO_VAE = "None"
DESCRIPTIONS = {  # A1111's interp descriptions
    "No interpolation": "No interpolation will be used. Requires one model; A. Allows for format conversion and VAE "
                        "baking.",
    "Weighted sum": "A weighted sum will be used for interpolation. Requires two models; A and B. The result is "
                    "calculated as A * (1 - M) + B * M",
    "Add difference": "The difference between the last two models will be added to the first. Requires three models; "
                      "A, B and C. The result is calculated as A + (B - C) * M",
}


def merge_source(state: ServerState, title: str | None, role: str):
    """The catalog's checkpoint `title` as a MergeSource (None when no title is chosen)."""
    from mixkit.io.merge_inputs import MergeSource

    if not title:
        return None
    entry = state.catalog.find(title)
    if not entry.is_file:
        raise ValueError(f"{role} {entry.name!r} is not a single-file checkpoint (a diffusers folder or hub model); "
                         "the Checkpoint Merger merges .safetensors / .ckpt files.")
    return MergeSource(Path(entry.source), entry.name)


def submit_merge(state: ServerState, primary: str | None, secondary: str | None, tertiary: str | None, method: str,
                 multiplier: float, save_as_half: bool, custom_name: str, checkpoint_format: str, config_source: str,
                 bake_in_vae: str, discard_weights: str, save_metadata: bool, add_merge_recipe: bool,
                 copy_metadata_fields: bool, metadata_json: str, *, session: str | None = None,
                 owner: str | None = None):
    """Queue the merge the form describes; its result is the MergeResult, and the checkpoint list is refreshed once the
    file is written. A form the merge would refuse is refused here (ValueError / TypeError, nothing queued): the
    checks that read no tensor run before the job is queued. The job goes on when the page's session ends (a reload):
    the page follows it as a task (`webui.ui.merger_task`), so a half-way merge is never thrown away unseen."""
    from mixkit.io.checkpoint_merge import check_merge_request, merge_checkpoints
    from mixkit.io.hashing import sha256_file
    from pipelines.control import StepProgress

    folder = state.catalog.models_dir
    if folder is None:
        raise ValueError("This server has no models folder to write a merged checkpoint into; start it with "
                         "--models-dir.")
    if not primary:
        raise ValueError("Merging requires a primary model (A).")
    sources = (merge_source(state, primary, "Primary model (A)"),
               merge_source(state, secondary, "Secondary model (B)") if method != "No interpolation" else None,
               merge_source(state, tertiary, "Tertiary model (C)") if method == "Add difference" else None)
    vae = None
    if bake_in_vae and bake_in_vae != NO_VAE:
        vae = state.vaes.find(bake_in_vae)  # an unknown name: UnknownNameError listing the valid ones
    try:
        metadata = json.loads(metadata_json or "{}") if save_metadata else None
    except ValueError as error:
        raise ValueError(f"Metadata in JSON format is not valid JSON ({error}).") from None
    kwargs = dict(output_dir=folder, method=method, multiplier=float(multiplier), save_as_half=bool(save_as_half),
                  checkpoint_format=checkpoint_format, custom_name=(custom_name or "").strip(), bake_in_vae=vae,
                  discard_weights=discard_weights or "", save_metadata=bool(save_metadata),
                  add_merge_recipe=bool(add_merge_recipe), copy_metadata_fields=bool(copy_metadata_fields),
                  metadata=metadata, config_source=config_source)

    def run(control, on_step):
        def progress(done: int, total: int, text: str) -> None:
            on_step(StepProgress(step=done, total_steps=total, batch_index=0, batch_count=1, latents=None,
                                 control=control))

        try:
            merged = merge_checkpoints(*sources, **kwargs, progress=progress, should_stop=lambda: control.interrupted)
            sha256_file(merged.path)  # listed as "name [hash]" at once, as A1111's calculate_shorthash after a merge
            return merged
        finally:
            state.catalog.refresh()  # as A1111's list_models after a merge (also after a failed one)

    check_merge_request(*sources, **kwargs)
    return state.worker.submit(run, JOB_NAME, session=session, owner=owner, keep_on_disconnect=True)


def read_metadata(state: ServerState, *titles) -> str:
    """A1111's "Read metadata from selected checkpoints": the chosen files' safetensors metadata, merged, as JSON."""
    from mixkit.io.merge_metadata import source_metadata

    metadata: dict = {}
    for title in titles:
        if title:
            source = merge_source(state, title, "Model")
            metadata.update(source_metadata(source))
    return json.dumps(metadata, indent=4, ensure_ascii=False)


@dataclass
class MergerTab:
    """The tab's widgets; `wire_merge` connects Merge once the other tabs' checkpoint lists exist (the tab is built
    before Settings, and a merge refreshes Settings' list)."""

    form: list  # Merge's inputs, in `submit_merge`'s order
    model_boxes: list  # A, B, C
    progress: object
    result: object
    merge: object
    interrupt: object
    task_box: object


def model_dropdown(state: ServerState, label: str, elem_id: str) -> gr.Dropdown:
    """A model dropdown listing the checkpoints as they are when the page is served (a file merged or added since the
    server started is in a reloaded page); any title is taken (an older page's, before its file was hashed), the
    catalog checks it at Merge."""
    dropdown = gr.Dropdown(state.catalog.titles(), value=None, label=label, elem_id=elem_id, allow_custom_value=True)
    serve_props(dropdown, lambda: {"choices": [(title, title) for title in state.catalog.titles()], "value": None})
    return dropdown


def build_merger_tab(state: ServerState) -> MergerTab:
    """Create the tab's controls (A1111's, with its defaults) and wire all but Merge (`wire_merge`)."""
    with gr.Row(equal_height=False):
        with gr.Column():
            description = gr.HTML(DESCRIPTIONS["Weighted sum"], elem_id="modelmerger_interp_description")
            with gr.Row():
                primary = model_dropdown(state, "Primary model (A)", "modelmerger_primary_model_name")
                secondary = model_dropdown(state, "Secondary model (B)", "modelmerger_secondary_model_name")
                tertiary = model_dropdown(state, "Tertiary model (C)", "modelmerger_tertiary_model_name")
                refresh = gr.Button("\U0001f504", scale=0, min_width=40, elem_id="modelmerger_refresh_checkpoints")
            custom_name = gr.Textbox(label="Custom Name (Optional)", elem_id="modelmerger_custom_name")
            multiplier = gr.Slider(0.0, 1.0, value=0.3, step=0.05, label="Multiplier (M) - set to 0 to get model A",
                                   elem_id="modelmerger_interp_amount")
            method = gr.Radio(list(DESCRIPTIONS), value="Weighted sum", label="Interpolation Method",
                              elem_id="modelmerger_interp_method")
            with gr.Row():
                checkpoint_format = gr.Radio(["ckpt", "safetensors"], value="safetensors", label="Checkpoint format",
                                             elem_id="modelmerger_checkpoint_format")
                save_as_half = gr.Checkbox(False, label="Save as float16", elem_id="modelmerger_save_as_half")
            with gr.Row():
                config_source = gr.Radio(["A, B or C", "B", "C", "Don't"], value="A, B or C", label="Copy config from",
                                         elem_id="modelmerger_config_method")
                bake_in_vae = gr.Dropdown([NO_VAE, *state.vaes.files()], value=NO_VAE, label="Bake in VAE",
                                          elem_id="modelmerger_bake_in_vae")
            discard_weights = gr.Textbox("", label="Discard weights with matching name",
                                         elem_id="modelmerger_discard_weights")
            with gr.Accordion("Metadata", open=False, elem_id="modelmerger_metadata") as metadata_editor:
                with gr.Row():
                    save_metadata = gr.Checkbox(True, label="Save metadata", elem_id="modelmerger_save_metadata")
                    add_merge_recipe = gr.Checkbox(True, label="Add merge recipe metadata",
                                                   elem_id="modelmerger_add_recipe")
                    copy_metadata = gr.Checkbox(True, label="Copy metadata from merged models",
                                                elem_id="modelmerger_copy_metadata")
                metadata_json = gr.TextArea("{}", label="Metadata in JSON format", elem_id="modelmerger_metadata_json")
                read = gr.Button("Read metadata from selected checkpoints", elem_id="modelmerger_read_metadata")
            with gr.Row():
                merge = gr.Button("Merge", variant="primary", elem_id="modelmerger_merge")
                interrupt = gr.Button("Interrupt", elem_id="modelmerger_interrupt")
        with gr.Column():
            progress = gr.HTML(progress_html(0, "Idle"), elem_id="modelmerger_progress")
            result = gr.HTML(elem_id="modelmerger_result")
            task_box = task_box_for(KIND)

    model_boxes = [primary, secondary, tertiary]

    def do_refresh(a: str | None, b: str | None, c: str | None):
        state.catalog.refresh()
        state.vaes.refresh()
        return *model_choices(state, a, b, c), gr.update(choices=[NO_VAE, *state.vaes.files()])

    method.change(lambda value: DESCRIPTIONS[value], inputs=[method], outputs=[description], queue=False)
    checkpoint_format.change(lambda fmt: gr.update(visible=fmt == "safetensors"), inputs=[checkpoint_format],
                             outputs=[metadata_editor], queue=False)
    refresh.click(do_refresh, inputs=model_boxes, outputs=[*model_boxes, bake_in_vae], queue=False)
    read.click(lambda a, b, c: _read_metadata_or_refuse(state, a, b, c), inputs=model_boxes, outputs=[metadata_json])
    form = [*model_boxes, method, multiplier, save_as_half, custom_name, checkpoint_format, config_source, bake_in_vae,
            discard_weights, save_metadata, add_merge_recipe, copy_metadata, metadata_json]
    return MergerTab(form, model_boxes, progress, result, merge, interrupt, task_box)


def model_choices(state: ServerState, *chosen) -> list:
    """The A/B/C dropdowns as the catalog is now, each choice kept under its title now (hashing a file adds
    " [hash]" to it), or cleared once its file is gone."""

    def current_title(value: str | None) -> str | None:
        try:
            return state.catalog.find(value).title if value else None
        except ValueError:
            return None

    return [gr.update(choices=state.catalog.titles(), value=current_title(value)) for value in chosen]


def wire_merge(state: ServerState, tab: MergerTab, other_lists: list[CheckpointList]) -> FollowedTab:
    """Wire Merge and Interrupt: the merge is queued as a task the page follows (and a reloaded page follows again,
    the returned FollowedTab), and when it ends every checkpoint list (A/B/C and `other_lists`) shows the new file."""
    outputs = [tab.progress, tab.result, tab.task_box]

    def do_merge(*form_and_task, request: gr.Request = None):
        *form, task_id = form_and_task
        try:
            task_id = checked_task_id(state, task_id)
            job = submit_merge(state, *form, session=getattr(request, "session_hash", None),
                               owner=page_owner(request))
        except (ValueError, TypeError, KeyError, OSError, QueueFullError) as error:
            message = error.args[0] if isinstance(error, KeyError) and error.args else error
            raise refused(str(message)) from None
        yield from follow_merge(state, registered_task(state, task_id, KIND, job, request, lambda merged: merged))

    inputs = [*tab.form, tab.task_box]
    tab.merge.click(do_merge, inputs=inputs, outputs=outputs, concurrency_limit=None, js=submit_js(len(inputs)),
                    api_name="modelmerger")  # A1111's name for the merge's JavaScript hook
    tab.interrupt.click(interrupt_own_job(state), inputs=[tab.task_box], queue=False)
    tab.task_box.change(refreshed_lists(lambda *chosen: model_choices(state, *chosen), other_lists),
                        inputs=[tab.task_box, *tab.model_boxes],
                        outputs=[*tab.model_boxes, *(listed.dropdown for listed in other_lists)], queue=False)
    return FollowedTab(KIND, tab.task_box, outputs, lambda task: follow_merge(state, task))


def _read_metadata_or_refuse(state: ServerState, *titles) -> str:
    try:
        return read_metadata(state, *titles)
    except (ValueError, OSError) as error:
        raise refused(str(error)) from None
