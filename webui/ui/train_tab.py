"""A1111's Train tab: for textual inversion, Create embedding, then Train it on a dataset folder, with progress,
Interrupt and the run's log (hypernetworks' sub-tabs: `webui.ui.hypernetwork_train_tab`; the Train form both use:
`webui.ui.train_run_form`). A run goes on when its page goes away; a reloaded page follows it by its task id
(`webui.ui.reattach`) and shows its log when it ends.

The handlers send A1111's `train_embedding` fields to the same functions the HTTP API calls
(`webui.embedding_jobs`), so the tab can do nothing the API would refuse, and the run waits in the one worker queue.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import gradio as gr
from webui.server_state import ServerState
from webui.ui.errors import refused
from webui.ui.progress_view import progress_html, status_text
from webui.ui.reattach import FollowedTab, follow_ui_task

if TYPE_CHECKING:
    from webui.ui.train_run_form import TrainRunKind

# The tab's fields, in A1111's train_embedding names, in the order the Train button sends them.
TRAIN_INPUTS = ("embedding_name", "data_root", "template_filename", "steps", "learn_rate", "batch_size",
                "gradient_step", "training_width", "training_height", "shuffle_tags", "tag_drop_out", "clip_grad_mode", "clip_grad_value",
                "save_embedding_every", "create_image_every", "preview_prompt")


def trainable_embeddings(state: ServerState) -> list[str]:
    """The embeddings the loaded model can train (those `/sdapi/v1/embeddings` lists as loaded)."""
    from webui.ui.embeddings_tab import embedding_rows

    return [row[0] for row in embedding_rows(state)]


def served_choices(choices: list[str]) -> dict:
    """A dropdown's choices in Gradio's config form ((label, value) pairs), for `serve_props`."""
    return {"choices": [(choice, choice) for choice in choices]}


def dataset_folders(state: ServerState) -> list[str]:
    """The folders below `--training-data-dir` (two levels), as the names `data_root` takes."""
    if not state.config.training_data_dir:
        return []
    root = Path(state.config.training_data_dir).expanduser()
    found = [path for path in root.glob("*") if path.is_dir()] + [path for path in root.glob("*/*") if path.is_dir()]
    return sorted(path.relative_to(root).as_posix() for path in found)


# The tab's number boxes, by their labels: an emptied one is named in the refusal.
NUMBER_LABELS = {"steps": "Max steps", "batch_size": "Batch size", "gradient_step": "Gradient accumulation steps",
                 "save_embedding_every": "Save a copy of embedding every N steps",
                 "create_image_every": "Save an image every N steps"}


def train_fields(values: dict) -> dict:
    """A1111's train_embedding fields from the tab's values (a preview prompt means A1111's "Read parameters from
    txt2img tab" with that prompt). An emptied number box is a ValueError naming it."""
    return form_fields(values, NUMBER_LABELS, "embedding_name")


def form_fields(values: dict, number_labels: dict[str, str], name_key: str) -> dict:
    """A1111's training fields from a Train sub-tab's values: sliders' floats as whole numbers, `number_labels`'
    boxes as whole numbers (an emptied one is a ValueError naming its label), an empty dropdown as "" (the API
    then names it), a preview prompt as "Read parameters from txt2img tab" with that prompt."""
    fields = dict(values)
    fields.update(training_width=int(values["training_width"]), training_height=int(values["training_height"]))
    for key, label in number_labels.items():
        if values[key] is None:
            raise ValueError(f"{label} is empty; enter a whole number.")
        fields[key] = int(values[key])
    fields["tag_drop_out"] = float(values["tag_drop_out"])
    fields[name_key] = values[name_key] or ""
    fields["data_root"] = values["data_root"] or ""
    fields["preview_from_txt2img"] = bool((values["preview_prompt"] or "").strip())
    return fields


def training_status(state: ServerState, job) -> tuple[float, str]:
    """(fraction, "Step 3/100, ETA 40s") for a training job, or its place in the queue."""
    snapshot = state.worker.progress()
    if snapshot.job_number != job.number or not snapshot.total_steps:
        return status_text(state, job)  # waiting in the queue, or starting (reading the dataset)
    return snapshot.fraction, f"Step {snapshot.step}/{snapshot.total_steps}, ETA {snapshot.eta_seconds:.0f}s"


def training_log(trained, seconds: float, saved: str = "Saved embedding") -> str:
    """What the finished run did: A1111's final text (file, step, loss), the files written on the way."""
    result = trained.result
    if not trained.written:
        return f"Interrupted before the first step: {trained.filename} is unchanged."
    lines = [f"{'Interrupted' if result.interrupted else 'Done'}: {trained.filename} holds step {trained.step} "
             f"({len(result.losses)} step(s) in {seconds:.1f}s).",
             f"Loss: {result.losses[-1]:.7f}" if result.losses else "Loss: -"]
    lines += [f"{saved}: {path}" for path in result.intermediate_outputs]
    lines.append(f"Run folder: {Path(result.output).parent}")
    return "\n".join(lines)


def follow_training(state: ServerState, task) -> object:
    """The Train tab's outputs (progress, log, task box) for its training `task` until it ends, then its log."""
    def running(task) -> tuple:
        return progress_html(*training_status(state, task.job)), gr.skip()

    def shown(task) -> tuple:
        return progress_html(1.0, task.result.splitlines()[0]), task.result

    return follow_ui_task(task, 3, running, shown)


def build_train_tab(state: ServerState) -> list[FollowedTab]:
    """Create the tab's sub-tabs (embeddings with an embeddings folder, hypernetworks with a hypernetwork folder);
    returns what a loading page needs to follow each sub-tab's training."""
    from webui.ui.hypernetwork_train_tab import build_hypernetwork_train_tabs

    followed = []
    if state.embedding_library is None:
        gr.Markdown("No embeddings folder configured: start the server with `--embeddings-dir FOLDER` to create and "
                    "train embeddings.")
    else:
        followed.append(build_embedding_train_tabs(state))
    if state.hypernetwork_library is None:
        gr.Markdown("No hypernetwork folder configured: start the server with `--hypernetwork-dir FOLDER` to create "
                    "and train hypernetworks.")
    else:
        followed.append(build_hypernetwork_train_tabs(state))
    return followed


def training_data_note(state: ServerState) -> None:
    """Without `--training-data-dir`, a Train sub-tab says how to give it datasets."""
    if not state.config.training_data_dir:
        gr.Markdown("Training reads datasets from a folder the operator allows: start the server with "
                    "`--training-data-dir FOLDER` and put each dataset in a folder below it.")


def embedding_run_kind() -> "TrainRunKind":
    """The Train sub-tab's names and functions for embeddings (`webui.ui.train_run_form`)."""
    from webui.embedding_jobs import submit_embedding_training
    from webui.ui.train_run_form import TrainRunKind

    return TrainRunKind(prefix="train_", what="embedding", label="Embedding", learn_rate="0.005",
                        learn_rate_label="Embedding Learning rate", input_names=TRAIN_INPUTS,
                        choices=trainable_embeddings, fields=train_fields, submit=submit_embedding_training)


def build_embedding_train_tabs(state: ServerState) -> FollowedTab:
    """The Create embedding and Train sub-tabs; returns what a loading page needs to follow their training."""
    from webui.embedding_jobs import create_embedding
    from webui.ui.train_run_form import build_train_run_form, wire_train_run

    with gr.Tab("Create embedding"):
        name = gr.Textbox(label="Name", elem_id="train_new_name")
        init_text = gr.Textbox(label="Initialization text", value="*", elem_id="train_init_text")
        vectors = gr.Slider(1, 75, value=1, step=1, label="Number of vectors per token", elem_id="train_vectors")
        overwrite = gr.Checkbox(label="Overwrite Old Embedding", value=False, elem_id="train_overwrite")
        create = gr.Button("Create embedding", variant="primary", elem_id="train_create")
        created = gr.Textbox(label="Result", interactive=False, elem_id="train_create_result")
    kind = embedding_run_kind()
    with gr.Tab("Train"):
        form = build_train_run_form(state, kind)

    def do_create(new_name: str, text: str, count: float, replace: bool):
        try:
            path = create_embedding(state, new_name, num_vectors_per_token=int(count), init_text=text,
                                    overwrite_old=bool(replace))
        except (ValueError, TypeError) as error:
            raise refused(str(error)) from None
        return f"Created embedding {path}", gr.Dropdown(choices=trainable_embeddings(state), value=new_name)

    create.click(do_create, inputs=[name, init_text, vectors, overwrite], outputs=[created, form.target])
    return wire_train_run(state, kind, form)
