"""A1111's Train tab: for textual inversion, Create embedding, then Train it on a dataset folder, with progress,
Interrupt and the run's log (hypernetworks' sub-tabs: `webui.ui.hypernetwork_train_tab`, built from these parts). A run goes on when its page goes away; a reloaded page follows it by its task id
(`webui.ui.reattach`) and shows its log when it ends.

The handlers send A1111's `train_embedding` fields to the same functions the HTTP API calls
(`webui.embedding_jobs`), so the tab can do nothing the API would refuse, and the run waits in the one worker queue.
"""

from __future__ import annotations

import time
from pathlib import Path

import gradio as gr
from webui.server_state import ServerState
from webui.ui.errors import refused, show_warning
from webui.ui.progress_view import progress_html, status_text
from webui.ui.page_values import serve_props
from webui.ui.reattach import (FollowedTab, checked_task_id, follow_ui_task, followed_task_id, page_owner,
                               registered_task, submit_js, task_box_for)
from webui.worker import QueueFullError

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


def run_settings_rows(prefix: str, what: str) -> tuple:
    """A1111's run settings rows, the same for embeddings and hypernetworks: batch size, gradient accumulation,
    width / height, tag shuffling and dropout, gradient clipping, save / preview intervals and the preview prompt
    (in that order), with `prefix` on their elem_ids and `what` in the save label."""
    with gr.Row():
        batch_size = gr.Number(value=1, precision=0, label="Batch size", elem_id=f"{prefix}batch_size")
        gradient_step = gr.Number(value=1, precision=0, label="Gradient accumulation steps",
                                  elem_id=f"{prefix}gradient_step")
    with gr.Row():  # A1111's two sliders: a run may train at a width other than its height
        width = gr.Slider(64, 2048, value=512, step=8, label="Width", elem_id=f"{prefix}training_width")
        height = gr.Slider(64, 2048, value=512, step=8, label="Height", elem_id=f"{prefix}training_height")
    with gr.Row():
        shuffle_tags = gr.Checkbox(label="Shuffle tags by ',' when creating prompts", elem_id=f"{prefix}shuffle")
        tag_drop_out = gr.Slider(0, 1, value=0, step=0.1, label="Drop out tags when creating prompts",
                                 elem_id=f"{prefix}tag_drop_out")
        clip_grad_mode = gr.Dropdown(["disabled", "norm"], value="disabled", label="Gradient clipping",
                                     elem_id=f"{prefix}clip_grad_mode")
        clip_grad_value = gr.Textbox(value="0.1", label="Clip to norm", elem_id=f"{prefix}clip_grad_value")
    with gr.Row():
        save_every = gr.Number(value=500, precision=0, label=f"Save a copy of {what} to log directory every N steps, "
                               "0 to disable", elem_id=f"{prefix}save_every")
        image_every = gr.Number(value=0, precision=0, label="Save an image to log directory every N steps, 0 to "
                                "disable", elem_id=f"{prefix}image_every")
    preview_prompt = gr.Textbox(label="Preview prompt (empty: the template's first line)",
                                elem_id=f"{prefix}preview_prompt")
    return (batch_size, gradient_step, width, height, shuffle_tags, tag_drop_out, clip_grad_mode, clip_grad_value,
            save_every, image_every, preview_prompt)


def build_embedding_train_tabs(state: ServerState) -> FollowedTab:
    """The Create embedding and Train sub-tabs; returns what a loading page needs to follow their training."""
    from mixkit.training.ti_templates import NAMED_TEMPLATES
    from webui.embedding_jobs import create_embedding, submit_embedding_training

    with gr.Tab("Create embedding"):
        name = gr.Textbox(label="Name", elem_id="train_new_name")
        init_text = gr.Textbox(label="Initialization text", value="*", elem_id="train_init_text")
        vectors = gr.Slider(1, 75, value=1, step=1, label="Number of vectors per token", elem_id="train_vectors")
        overwrite = gr.Checkbox(label="Overwrite Old Embedding", value=False, elem_id="train_overwrite")
        create = gr.Button("Create embedding", variant="primary", elem_id="train_create")
        created = gr.Textbox(label="Result", interactive=False, elem_id="train_create_result")
    with gr.Tab("Train"):
        training_data_note(state)
        with gr.Row():
            # Choices written into each page served, so one opened after a Create (or a file copied into the
            # folder) lists it; Gradio checks a value against its build-time choices unless custom values are
            # allowed, and the name is checked by the API's own check when Train is pressed.
            embedding = gr.Dropdown(trainable_embeddings(state), label="Embedding", elem_id="train_embedding",
                                    allow_custom_value=True)
            serve_props(embedding, lambda: served_choices(trainable_embeddings(state)))
            refresh = gr.Button("Refresh", elem_id="train_refresh", scale=0)
        data_root = gr.Dropdown(dataset_folders(state), label="Dataset directory (below the training data folder)",
                                allow_custom_value=True, elem_id="train_data_root")
        serve_props(data_root, lambda: served_choices(dataset_folders(state)))
        template = gr.Dropdown(NAMED_TEMPLATES.names(), value="style_filewords.txt", label="Prompt template",
                               elem_id="train_template")
        with gr.Row():
            steps = gr.Number(value=100000, precision=0, label="Max steps", elem_id="train_steps")
            learn_rate = gr.Textbox(value="0.005", label="Embedding Learning rate", elem_id="train_learn_rate")
        (batch_size, gradient_step, width, height, shuffle_tags, tag_drop_out, clip_grad_mode, clip_grad_value,
         save_every, image_every, preview_prompt) = run_settings_rows("train_", "embedding")
        with gr.Row():
            train = gr.Button("Train Embedding", variant="primary", elem_id="train_start")
            interrupt = gr.Button("Interrupt", elem_id="train_interrupt")
        progress = gr.HTML(progress_html(0, "Idle"), elem_id="train_progress")
        log = gr.Textbox(label="Log", lines=5, interactive=False, elem_id="train_log")
        task_box = task_box_for("train")

    def do_create(new_name: str, text: str, count: float, replace: bool):
        try:
            path = create_embedding(state, new_name, num_vectors_per_token=int(count), init_text=text,
                                    overwrite_old=bool(replace))
        except (ValueError, TypeError) as error:
            raise refused(str(error)) from None
        return f"Created embedding {path}", gr.Dropdown(choices=trainable_embeddings(state), value=new_name)

    def do_refresh():
        return (gr.Dropdown(choices=trainable_embeddings(state)), gr.Dropdown(choices=dataset_folders(state)))

    def do_train(request: gr.Request, *values_and_task_id):
        # The session lets this page's Interrupt reach the run at once; the task id (made by the page, the last
        # input) lets a reloaded page follow it: the run goes on when the page goes away.
        *values, task_id = values_and_task_id
        session = getattr(request, "session_hash", None)
        form = dict(zip(TRAIN_INPUTS, values))
        if not form["embedding_name"]:  # the API's own refusal of a missing name speaks of its HTTP route
            raise refused("Choose the embedding to train under Embedding (make one under Create embedding first).")
        try:
            task_id = checked_task_id(state, task_id)
            job = submit_embedding_training(state, train_fields(form), session=session, keep_on_disconnect=True)
        except (ValueError, TypeError) as error:
            raise refused(str(error)) from None
        except QueueFullError as error:
            show_warning("Queue full: " + str(error), state)
            yield progress_html(0, "Queue full - try again in a moment"), gr.skip(), gr.skip()
            return
        started = time.monotonic()
        # the log is written when the run ends, on the worker's thread, whether or not a page follows it
        task = registered_task(state, task_id, "train", job, request,
                               lambda trained: training_log(trained, time.monotonic() - started))
        yield from follow_training(state, task)

    create.click(do_create, inputs=[name, init_text, vectors, overwrite], outputs=[created, embedding])
    refresh.click(do_refresh, outputs=[embedding, data_root], queue=False)
    train_inputs = [embedding, data_root, template, steps, learn_rate, batch_size, gradient_step, width, height,
                    shuffle_tags, tag_drop_out, clip_grad_mode, clip_grad_value, save_every, image_every,
                    preview_prompt, task_box]
    outputs = [progress, log, task_box]
    train.click(do_train, inputs=train_inputs, outputs=outputs, concurrency_limit=None,
                js=submit_js(len(train_inputs)))

    # The page sends the task it follows, which reaches a run started before a reload (another session).
    def interrupt_own_job(request: gr.Request, task_box: str = "") -> None:
        state.interrupt_session(getattr(request, "session_hash", None))
        state.tasks.interrupt(followed_task_id(task_box), page_owner(request))

    interrupt.click(interrupt_own_job, inputs=[task_box], queue=False)
    return FollowedTab("train", task_box, outputs, lambda task: follow_training(state, task))
