"""A1111's Train tab for hypernetworks: "Create hypernetwork", then "Train hypernetwork" on a dataset folder, with
progress, Interrupt and the run's log; a run goes on when its page goes away and a reloaded page follows it.

The handlers send A1111's create_hypernetwork and train_hypernetwork fields to the functions the HTTP API calls
(`webui.hypernetwork_jobs`), so the tab can do nothing the API would refuse; the form only turns its widgets' values
into those fields (the shared parts: `webui.ui.train_tab`).
"""

from __future__ import annotations

import time

import gradio as gr
from webui.server_state import ServerState
from webui.ui.errors import refused, show_warning
from webui.ui.page_values import serve_props
from webui.ui.progress_view import progress_html
from webui.ui.reattach import (FollowedTab, checked_task_id, interrupt_own_job, registered_task, submit_js,
                               task_box_for)
from webui.ui.train_tab import (dataset_folders, follow_training, form_fields, run_settings_rows, served_choices,
                                training_data_note, training_log)
from webui.worker import QueueFullError

KIND = "train_hn"
# The Train hypernetwork button's fields, in A1111's train_hypernetwork names, in the order it sends them.
HN_TRAIN_INPUTS = ("hypernetwork_name", "data_root", "template_filename", "steps", "learn_rate", "batch_size",
                   "gradient_step", "training_width", "training_height", "shuffle_tags", "tag_drop_out",
                   "clip_grad_mode", "clip_grad_value", "save_hypernetwork_every", "create_image_every",
                   "preview_prompt")
# The Create hypernetwork button's fields, in A1111's create_hypernetwork names.
HN_CREATE_INPUTS = ("name", "enable_sizes", "layer_structure", "activation_func", "weight_init", "add_layer_norm",
                    "use_dropout", "dropout_structure", "overwrite_old")
HN_NUMBER_LABELS = {"steps": "Max steps", "batch_size": "Batch size", "gradient_step": "Gradient accumulation steps",
                    "save_hypernetwork_every": "Save a copy of hypernetwork every N steps",
                    "create_image_every": "Save an image every N steps"}


def hn_train_fields(values: dict) -> dict:
    """A1111's train_hypernetwork fields from the sub-tab's values (an emptied number box: ValueError naming it)."""
    return form_fields(values, HN_NUMBER_LABELS, "hypernetwork_name")


def hypernetwork_names(state: ServerState) -> list[str]:
    """The hypernetworks of the folder, as `/sdapi/v1/hypernetworks` lists them now."""
    return [item["name"] for item in state.hypernetwork_listing()]


def width_choices(state: ServerState) -> list[str]:
    """A1111's Modules checkboxes (its SD 1.x/2.x widths) plus the loaded model's own attention widths, so an SDXL
    (2048) or a small model's hypernetwork can be made here too."""
    from mixkit.hypernetworks.shape import A1111_WIDTHS
    from mixkit.training.hn_trainer import attention_context_widths

    model = state.holder.loaded_model()
    widths = set(A1111_WIDTHS) | (set(attention_context_widths(model.unet)) if model is not None else set())
    return [str(width) for width in sorted(widths)]


def build_hypernetwork_train_tabs(state: ServerState) -> FollowedTab:
    """The Create hypernetwork and Train hypernetwork sub-tabs; returns what a loading page needs to follow their
    training."""
    from mixkit.hypernetworks.shape import A1111_DEFAULT_WIDTHS, WEIGHT_INITS, buildable_activations
    from mixkit.training.ti_templates import NAMED_TEMPLATES
    from webui.hypernetwork_jobs import create_hypernetwork, submit_hypernetwork_training

    with gr.Tab("Create hypernetwork"):
        name = gr.Textbox(label="Name", elem_id="train_hn_new_name")
        sizes = gr.CheckboxGroup(width_choices(state), value=[str(width) for width in A1111_DEFAULT_WIDTHS],
                                 label="Modules", elem_id="train_hn_sizes")
        layers = gr.Textbox("1, 2, 1", label="Enter hypernetwork layer structure", elem_id="train_hn_layers")
        activation = gr.Dropdown(buildable_activations(), value="linear", label="Select activation function of "
                                 "hypernetwork. Recommended : Swish / Linear(none)", elem_id="train_hn_activation")
        weight_init = gr.Dropdown(list(WEIGHT_INITS), value="Normal", label="Select Layer weights initialization. "
                                  "Recommended: Kaiming for relu-like, Xavier for sigmoid-like, Normal otherwise",
                                  elem_id="train_hn_weight_init")
        layer_norm = gr.Checkbox(label="Add layer normalization", elem_id="train_hn_layer_norm")
        use_dropout = gr.Checkbox(label="Use dropout", elem_id="train_hn_use_dropout")
        dropouts = gr.Textbox("0, 0, 0", label="Enter hypernetwork Dropout structure (or empty). Recommended : "
                              "0~0.35 incrementing sequence: 0, 0.05, 0.15", elem_id="train_hn_dropouts")
        overwrite = gr.Checkbox(label="Overwrite Old Hypernetwork", elem_id="train_hn_overwrite")
        create = gr.Button("Create hypernetwork", variant="primary", elem_id="train_hn_create")
        created = gr.Textbox(label="Result", interactive=False, elem_id="train_hn_create_result")
    with gr.Tab("Train hypernetwork"):
        training_data_note(state)
        with gr.Row():
            # choices written into each page served, so one opened after a Create lists the new file
            hypernetwork = gr.Dropdown(hypernetwork_names(state), label="Hypernetwork", allow_custom_value=True,
                                       elem_id="train_hn_hypernetwork")
            serve_props(hypernetwork, lambda: served_choices(hypernetwork_names(state)))
            refresh = gr.Button("Refresh", elem_id="train_hn_refresh", scale=0)
        data_root = gr.Dropdown(dataset_folders(state), label="Dataset directory (below the training data folder)",
                                allow_custom_value=True, elem_id="train_hn_data_root")
        serve_props(data_root, lambda: served_choices(dataset_folders(state)))
        template = gr.Dropdown(NAMED_TEMPLATES.names(), value="style_filewords.txt", label="Prompt template",
                               elem_id="train_hn_template")
        with gr.Row():
            steps = gr.Number(value=100000, precision=0, label="Max steps", elem_id="train_hn_steps")
            learn_rate = gr.Textbox(value="0.00001", label="Hypernetwork Learning rate (one rate, or A1111's "
                                    "'rate:step, ...' schedule)", elem_id="train_hn_learn_rate")
        (batch_size, gradient_step, width, height, shuffle_tags, tag_drop_out, clip_grad_mode, clip_grad_value,
         save_every, image_every, preview_prompt) = run_settings_rows("train_hn_", "hypernetwork")
        with gr.Row():
            train = gr.Button("Train Hypernetwork", variant="primary", elem_id="train_hn_start")
            interrupt = gr.Button("Interrupt", elem_id="train_hn_interrupt")
        progress = gr.HTML(progress_html(0, "Idle"), elem_id="train_hn_progress")
        log = gr.Textbox(label="Log", lines=5, interactive=False, elem_id="train_hn_log")
        task_box = task_box_for(KIND)

    def do_create(*values):
        arguments = dict(zip(HN_CREATE_INPUTS, values))
        new_name = arguments.pop("name")
        try:
            path = create_hypernetwork(state, new_name, **arguments)
        except (ValueError, TypeError) as error:
            raise refused(str(error)) from None
        return f"Created hypernetwork {path}", gr.Dropdown(choices=hypernetwork_names(state), value=new_name)

    def do_refresh():
        return gr.Dropdown(choices=hypernetwork_names(state)), gr.Dropdown(choices=dataset_folders(state))

    def do_train(request: gr.Request, *values_and_task_id):
        *values, task_id = values_and_task_id
        session = getattr(request, "session_hash", None)
        form = dict(zip(HN_TRAIN_INPUTS, values))
        if not form["hypernetwork_name"]:  # the API's own refusal speaks of its HTTP route
            raise refused("Choose the hypernetwork to train under Hypernetwork (make one under Create hypernetwork "
                          "first).")
        try:
            task_id = checked_task_id(state, task_id)
            job = submit_hypernetwork_training(state, hn_train_fields(form), session=session,
                                               keep_on_disconnect=True)
        except (ValueError, TypeError) as error:
            raise refused(str(error)) from None
        except QueueFullError as error:
            show_warning("Queue full: " + str(error), state)
            yield progress_html(0, "Queue full - try again in a moment"), gr.skip(), gr.skip()
            return
        started = time.monotonic()
        task = registered_task(state, task_id, KIND, job, request,
                               lambda trained: training_log(trained, time.monotonic() - started, "Saved hypernetwork"))
        yield from follow_training(state, task)

    create.click(do_create, inputs=[name, sizes, layers, activation, weight_init, layer_norm, use_dropout, dropouts,
                                    overwrite], outputs=[created, hypernetwork])
    refresh.click(do_refresh, outputs=[hypernetwork, data_root], queue=False)
    train_inputs = [hypernetwork, data_root, template, steps, learn_rate, batch_size, gradient_step, width, height,
                    shuffle_tags, tag_drop_out, clip_grad_mode, clip_grad_value, save_every, image_every,
                    preview_prompt, task_box]
    outputs = [progress, log, task_box]
    train.click(do_train, inputs=train_inputs, outputs=outputs, concurrency_limit=None,
                js=submit_js(len(train_inputs)))

    interrupt.click(interrupt_own_job(state), inputs=[task_box], queue=False)
    return FollowedTab(KIND, task_box, outputs, lambda task: follow_training(state, task))
