"""A1111's Train tab for hypernetworks: "Create hypernetwork", then "Train hypernetwork" on a dataset folder, with
progress, Interrupt and the run's log; a run goes on when its page goes away and a reloaded page follows it.

The handlers send A1111's create_hypernetwork and train_hypernetwork fields to the functions the HTTP API calls
(`webui.hypernetwork_jobs`), so the tab can do nothing the API would refuse; the form only turns its widgets' values
into those fields (the Train form is the embeddings' one: `webui.ui.train_run_form`). The Modules choices follow the
loaded model: each page served offers its attention widths, as the other model lists are served afresh.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import gradio as gr
from webui.server_state import ServerState
from webui.ui.errors import refused
from webui.ui.page_values import serve_props
from webui.ui.reattach import FollowedTab
from webui.ui.train_tab import form_fields, served_choices

if TYPE_CHECKING:
    from webui.ui.train_run_form import TrainRunKind

KIND = "train_hn"
# The Train hypernetwork button's fields, in A1111's train_hypernetwork names, in the order it sends them.
HN_TRAIN_INPUTS = ("hypernetwork_name", "data_root", "template_filename", "steps", "learn_rate", "batch_size",
                   "gradient_step", "training_width", "training_height", "shuffle_tags", "tag_drop_out",
                   "clip_grad_mode", "clip_grad_value", "save_hypernetwork_every", "create_image_every",
                   "preview_prompt", "save_optimizer_state")
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


def served_width_choices(state: ServerState, sizes: gr.CheckboxGroup) -> dict:
    """The Modules choices a page served now shows (`width_choices` of the model loaded now). The checkbox group's
    own choices grow to every width ever offered: Gradio refuses a ticked value outside them, and a page served
    before a model switch may still send its widths (the create's own check then judges them)."""
    offered = width_choices(state)
    known = {value for _, value in sizes.choices}
    sizes.choices = [(width, width) for width in sorted(known | set(offered), key=int)]
    return served_choices(offered)


def hypernetwork_run_kind() -> "TrainRunKind":
    """The Train hypernetwork sub-tab's names and functions (`webui.ui.train_run_form`)."""
    from webui.hypernetwork_jobs import submit_hypernetwork_training
    from webui.ui.train_run_form import TrainRunKind

    return TrainRunKind(prefix="train_hn_", what="hypernetwork", label="Hypernetwork", learn_rate="0.00001",
                        learn_rate_label="Hypernetwork Learning rate (one rate, or A1111's 'rate:step, ...' schedule)",
                        input_names=HN_TRAIN_INPUTS, choices=hypernetwork_names, fields=hn_train_fields,
                        submit=submit_hypernetwork_training)


def optimizer_state_row(state: ServerState) -> tuple:
    """A1111's Settings > Training "Saves Optimizer state as separate *.optim file", per run here; it starts at the
    server's option of that name."""
    def option() -> bool:
        return bool(state.options.get("save_optimizer_state"))

    checkbox = gr.Checkbox(option(), elem_id="train_hn_save_optimizer_state",
                           label="Save Optimizer state as separate *.optim file (a later run on the file continues it)")
    serve_props(checkbox, lambda: {"value": option()})  # a page served after the option changed shows it
    return (checkbox,)


def build_hypernetwork_train_tabs(state: ServerState) -> FollowedTab:
    """The Create hypernetwork and Train hypernetwork sub-tabs; returns what a loading page needs to follow their
    training."""
    from mixkit.hypernetworks.shape import A1111_DEFAULT_WIDTHS, WEIGHT_INITS, buildable_activations
    from webui.hypernetwork_jobs import create_hypernetwork
    from webui.ui.train_run_form import build_train_run_form, wire_train_run

    with gr.Tab("Create hypernetwork"):
        name = gr.Textbox(label="Name", elem_id="train_hn_new_name")
        sizes = gr.CheckboxGroup(width_choices(state), value=[str(width) for width in A1111_DEFAULT_WIDTHS],
                                 label="Modules", elem_id="train_hn_sizes")
        serve_props(sizes, lambda: served_width_choices(state, sizes))
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
    kind = hypernetwork_run_kind()
    with gr.Tab("Train hypernetwork"):
        form = build_train_run_form(state, kind, lambda: optimizer_state_row(state))

    def do_create(*values):
        arguments = dict(zip(HN_CREATE_INPUTS, values))
        new_name = arguments.pop("name")
        try:
            path = create_hypernetwork(state, new_name, **arguments)
        except (ValueError, TypeError) as error:
            raise refused(str(error)) from None
        return f"Created hypernetwork {path}", gr.Dropdown(choices=hypernetwork_names(state), value=new_name)

    create.click(do_create, inputs=[name, sizes, layers, activation, weight_init, layer_norm, use_dropout, dropouts,
                                    overwrite], outputs=[created, form.target])
    return wire_train_run(state, kind, form)
