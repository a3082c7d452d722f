"""Checkpoint Merger: A1111's tab (modules/ui_checkpoint_merger.py) over `mixkit.io.merge_checkpoints`.

The models are chosen from the server's checkpoint list (single files; a diffusers folder is refused with advice),
the VAE to bake in from its VAE list, and the result is written into the models folder (`--models-dir`, A1111's
`--ckpt-dir`), so a client never names a server path. The merge is a job in the server's queue, like a generation
(progress shows here and in `/sdapi/v1/progress`; Interrupt stops it before anything is written); when it ends the
checkpoint list is refreshed, so the new file is in the A/B/C dropdowns, in Settings' checkpoint list (after its
refresh button or a reload) and in `/sdapi/v1/sd-models`. All bounds are the Python API's; this file translates.
"""

from __future__ import annotations

import html
import json
import logging
from pathlib import Path

import gradio as gr

from webui.error_paths import server_path_redactor
from webui.server_state import ServerState
from webui.ui.errors import refused
from webui.ui.progress_view import POLL_SECONDS, job_status, progress_html
from webui.worker import QueueFullError

logger = logging.getLogger(__name__)

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
                 copy_metadata_fields: bool, metadata_json: str, *, session: str | None = None):
    """Queue the merge the form describes; its result is the MergeResult, and the checkpoint list is refreshed once the
    file is written. A form the merge would refuse is refused here (ValueError / TypeError, nothing queued): the
    checks that read no tensor run before the job is queued."""
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
    return state.worker.submit(run, JOB_NAME, session=session)


def read_metadata(state: ServerState, *titles) -> str:
    """A1111's "Read metadata from selected checkpoints": the chosen files' safetensors metadata, merged, as JSON."""
    from mixkit.io.merge_metadata import source_metadata

    metadata: dict = {}
    for title in titles:
        if title:
            source = merge_source(state, title, "Model")
            metadata.update(source_metadata(source))
    return json.dumps(metadata, indent=4, ensure_ascii=False)


def build_merger_tab(state: ServerState) -> None:
    """Create the tab's controls (A1111's, with its defaults) and wire Merge to the queue."""
    titles = state.catalog.titles
    with gr.Row(equal_height=False):
        with gr.Column():
            description = gr.HTML(DESCRIPTIONS["Weighted sum"], elem_id="modelmerger_interp_description")
            with gr.Row():
                primary = gr.Dropdown(titles(), value=None, label="Primary model (A)",
                                      elem_id="modelmerger_primary_model_name")
                secondary = gr.Dropdown(titles(), value=None, label="Secondary model (B)",
                                        elem_id="modelmerger_secondary_model_name")
                tertiary = gr.Dropdown(titles(), value=None, label="Tertiary model (C)",
                                       elem_id="modelmerger_tertiary_model_name")
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

    model_boxes = [primary, secondary, tertiary]

    def current_title(value: str | None) -> str | None:
        """A choice's title now (hashing a file adds " [hash]" to it), None once its file is gone."""
        try:
            return state.catalog.find(value).title if value else None
        except ValueError:
            return None

    def choices(*chosen):
        return [gr.update(choices=titles(), value=current_title(value)) for value in chosen]

    def do_refresh(a: str | None, b: str | None, c: str | None):
        state.catalog.refresh()
        state.vaes.refresh()
        return *choices(a, b, c), gr.update(choices=[NO_VAE, *state.vaes.files()])

    def do_merge(a: str | None, b: str | None, c: str | None, method_value: str, amount: float, half: bool,
                 name: str, fmt: str, config: str, vae: str, discard: str, with_metadata: bool, with_recipe: bool,
                 copy_fields: bool, json_text: str, request: gr.Request = None):
        session = getattr(request, "session_hash", None)
        form = (a, b, c, method_value, amount, half, name, fmt, config, vae, discard, with_metadata, with_recipe,
                copy_fields, json_text)
        try:
            job = submit_merge(state, *form, session=session)
        except (ValueError, TypeError, KeyError, OSError, QueueFullError) as error:
            message = error.args[0] if isinstance(error, KeyError) and error.args else error
            raise refused(str(message)) from None
        while not job.future.done():
            yield progress_html(*job_status(state, job, merging_text)), gr.skip(), *[gr.skip()] * 3
            try:
                job.future.exception(timeout=POLL_SECONDS)
            except Exception:  # noqa: BLE001 - a timeout, or the cancelled future; both end in the loop check
                pass
        chosen = (a, b, c)
        if job.future.cancelled():  # Interrupt pressed while it waited in the queue
            yield progress_html(0, "Interrupted before it started: nothing was written"), "", *choices(*chosen)
            return
        try:
            merged = job.future.result()
        except Exception as error:  # noqa: BLE001 - the merge's own error, shown as A1111 shows it
            logger.warning("Checkpoint merge failed: %s", error)
            message = server_path_redactor(state)(f"Error merging checkpoints: {error}")  # no server path in a page
            yield progress_html(0, "Merge failed"), html.escape(message, quote=False), *choices(*chosen)
            return
        text = f"Checkpoint saved to {merged.path.name}" + (f" (config: {merged.config_path.name})"
                                                           if merged.config_path else "")
        yield progress_html(1, "Checkpoint saved"), html.escape(text, quote=False), *choices(*chosen)

    def do_interrupt(request: gr.Request = None):
        state.interrupt_session(getattr(request, "session_hash", None))

    method.change(lambda value: DESCRIPTIONS[value], inputs=[method], outputs=[description], queue=False)
    checkpoint_format.change(lambda fmt: gr.update(visible=fmt == "safetensors"), inputs=[checkpoint_format],
                             outputs=[metadata_editor], queue=False)
    refresh.click(do_refresh, inputs=model_boxes, outputs=[*model_boxes, bake_in_vae], queue=False)
    read.click(lambda a, b, c: _read_metadata_or_refuse(state, a, b, c), inputs=model_boxes, outputs=[metadata_json])
    form = [*model_boxes, method, multiplier, save_as_half, custom_name, checkpoint_format, config_source, bake_in_vae,
            discard_weights, save_metadata, add_merge_recipe, copy_metadata, metadata_json]
    merge.click(do_merge, inputs=form, outputs=[progress, result, *model_boxes], concurrency_limit=None,
                api_name="modelmerger")  # A1111's name for the merge's JavaScript hook
    interrupt.click(do_interrupt, queue=False)


def merging_text(snapshot) -> str:
    """The progress line while the merge runs: which key of how many."""
    if snapshot.total_steps > 1:
        return f"Merging: key {snapshot.step}/{snapshot.total_steps}"
    return "Saving..."


def _read_metadata_or_refuse(state: ServerState, *titles) -> str:
    try:
        return read_metadata(state, *titles)
    except (ValueError, OSError) as error:
        raise refused(str(error)) from None
