"""The "Train" form A1111's Train tab shows for embeddings and for hypernetworks, built and wired once.

Both sub-tabs have the same rows (what to train with a Refresh button, the dataset folder, the prompt template, steps
and learning rate, A1111's run settings, Train / Interrupt, progress and log) and the same handlers (refresh the
lists, queue the run through the HTTP API's own submit function, follow it, interrupt the page's own run); they
differ only in names, elem_id prefixes, defaults and the submit function, which `TrainRunKind` holds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import gradio as gr
from webui.server_state import ServerState
from webui.ui.errors import refused, show_warning
from webui.ui.page_values import serve_props
from webui.ui.progress_view import progress_html
from webui.ui.reattach import (FollowedTab, checked_task_id, interrupt_own_job, registered_task, submit_js,
                               task_box_for)
from webui.ui.train_tab import (dataset_folders, follow_training, served_choices, training_data_note,
                                training_log)
from webui.worker import QueueFullError


@dataclass(frozen=True)
class TrainRunKind:
    """What makes one sub-tab's form its own: `prefix` of its elem_ids (also its task kind, without the "_"),
    `what` ("embedding") in its labels and messages, `label` of its target dropdown, its learning rate box's
    default and label, the A1111 field names its inputs send (`input_names`, in order), and the functions that list
    its targets, turn the values into A1111's fields and queue the run."""

    prefix: str
    what: str
    label: str
    learn_rate: str
    learn_rate_label: str
    input_names: tuple[str, ...]
    choices: Callable[[ServerState], list[str]]
    fields: Callable[[dict], dict]
    submit: Callable

    @property
    def task_kind(self) -> str:
        return self.prefix.rstrip("_")


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


@dataclass
class TrainRunForm:
    """The form's widgets; `inputs` is what its Train button sends (its kind's `input_names`, then the task box)."""

    target: gr.Dropdown
    refresh: gr.Button
    data_root: gr.Dropdown
    inputs: list
    train: gr.Button
    interrupt: gr.Button
    progress: gr.HTML
    log: gr.Textbox
    task_box: gr.Textbox

    @property
    def outputs(self) -> list:
        return [self.progress, self.log, self.task_box]


def build_train_run_form(state: ServerState, kind: TrainRunKind, extra_rows: Callable[[], tuple] = tuple
                         ) -> TrainRunForm:
    """The form's rows, in A1111's order; `extra_rows()` builds a kind's own inputs after the run settings (their
    names end its `input_names`)."""
    from mixkit.training.ti_templates import NAMED_TEMPLATES

    prefix = kind.prefix
    training_data_note(state)
    with gr.Row():
        # Choices written into each page served, so one opened after a Create (or a file copied into the folder)
        # lists it; Gradio checks a value against its build-time choices unless custom values are allowed, and the
        # name is checked by the API's own check when Train is pressed.
        target = gr.Dropdown(kind.choices(state), label=kind.label, allow_custom_value=True,
                             elem_id=f"{prefix}{kind.what}")
        serve_props(target, lambda: served_choices(kind.choices(state)))
        refresh = gr.Button("Refresh", elem_id=f"{prefix}refresh", scale=0)
    data_root = gr.Dropdown(dataset_folders(state), label="Dataset directory (below the training data folder)",
                            allow_custom_value=True, elem_id=f"{prefix}data_root")
    serve_props(data_root, lambda: served_choices(dataset_folders(state)))
    template = gr.Dropdown(NAMED_TEMPLATES.names(), value="style_filewords.txt", label="Prompt template",
                           elem_id=f"{prefix}template")
    with gr.Row():
        steps = gr.Number(value=100000, precision=0, label="Max steps", elem_id=f"{prefix}steps")
        learn_rate = gr.Textbox(value=kind.learn_rate, label=kind.learn_rate_label, elem_id=f"{prefix}learn_rate")
    settings = run_settings_rows(prefix, kind.what)
    extra = extra_rows()
    with gr.Row():
        train = gr.Button(f"Train {kind.label}", variant="primary", elem_id=f"{prefix}start")
        interrupt = gr.Button("Interrupt", elem_id=f"{prefix}interrupt")
    progress = gr.HTML(progress_html(0, "Idle"), elem_id=f"{prefix}progress")
    log = gr.Textbox(label="Log", lines=5, interactive=False, elem_id=f"{prefix}log")
    task_box = task_box_for(kind.task_kind)
    inputs = [target, data_root, template, steps, learn_rate, *settings, *extra]
    if len(inputs) != len(kind.input_names):
        raise ValueError(f"the {kind.what} form has {len(inputs)} inputs for the fields {kind.input_names}")
    return TrainRunForm(target, refresh, data_root, [*inputs, task_box], train, interrupt, progress, log, task_box)


def wire_train_run(state: ServerState, kind: TrainRunKind, form: TrainRunForm) -> FollowedTab:
    """The form's handlers; returns what a loading page needs to follow its training."""

    def do_refresh():
        return gr.Dropdown(choices=kind.choices(state)), gr.Dropdown(choices=dataset_folders(state))

    def do_train(request: gr.Request, *values_and_task_id):
        # The session lets this page's Interrupt reach the run at once; the task id (made by the page, the last
        # input) lets a reloaded page follow it: the run goes on when the page goes away.
        *values, task_id = values_and_task_id
        session = getattr(request, "session_hash", None)
        values = dict(zip(kind.input_names, values))
        if not values[kind.input_names[0]]:  # the API's own refusal of a missing name speaks of its HTTP route
            raise refused(f"Choose the {kind.what} to train under {kind.label} (make one under Create {kind.what} "
                          "first).")
        try:
            task_id = checked_task_id(state, task_id)
            job = kind.submit(state, kind.fields(values), session=session, keep_on_disconnect=True)
        except (ValueError, TypeError) as error:
            raise refused(str(error)) from None
        except QueueFullError as error:
            show_warning("Queue full: " + str(error), state)
            yield progress_html(0, "Queue full - try again in a moment"), gr.skip(), gr.skip()
            return
        started = time.monotonic()
        # the log is written when the run ends, on the worker's thread, whether or not a page follows it
        task = registered_task(state, task_id, kind.task_kind, job, request,
                               lambda trained: training_log(trained, time.monotonic() - started,
                                                            f"Saved {kind.what}"))
        yield from follow_training(state, task)

    form.refresh.click(do_refresh, outputs=[form.target, form.data_root], queue=False)
    form.train.click(do_train, inputs=form.inputs, outputs=form.outputs, concurrency_limit=None,
                     js=submit_js(len(form.inputs)))
    form.interrupt.click(interrupt_own_job(state), inputs=[form.task_box], queue=False)
    return FollowedTab(kind.task_kind, form.task_box, form.outputs, lambda task: follow_training(state, task))
