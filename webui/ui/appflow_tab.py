"""AppFlow: pick an app; its input widgets are generated from the app's declared input ports, its options form from
the app's declared option specs (`webui.ui.appflow_options`; values kept per app while the page lives). A run goes on
when its page goes away: a reloaded page follows it by its task id and shows its outputs (`webui.ui.appflow_task`)."""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState
from webui.ui.appflow_options import build_option_widgets, options_from_values, remember_option
from webui.ui.appflow_task import appflow_finish, clip_player, follow_appflow
from webui.ui.errors import redacting, refused
from webui.ui.progress_view import progress_html
from webui.ui.reattach import (FollowedTab, checked_task_id, interrupt_own_job, registered_task, submit_js,
                               task_box_for)
from webui.worker import QueueFullError


def input_widget(name: str, port: str, *, mask: bool = False):
    """A widget for one declared input port ("image", "text?", "texts", ...); None for types a form cannot hold.

    Image widgets hand over the picture in its own mode (image_mode=None) for the app to read as it reads files:
    Gradio's "RGB" conversion dropped the alpha channel, so a transparent picture came out on black in the UI but
    on white from Python and HTTP, and a mask input (`describe_app()["mask_inputs"]`) lost its strokes on a
    transparent layer."""
    kind, optional = port.rstrip("?"), port.endswith("?")
    label = f"{name} ({kind}{', optional' if optional else ''})"
    if kind == "image":
        if mask:
            label += ": white, or opaque strokes on a transparent layer, is repainted"
        return gr.Image(label=label, type="pil", image_mode=None, elem_id=f"appflow_input_{name}")
    if kind == "images":
        return gr.Gallery(label=label, type="pil", interactive=True, elem_id=f"appflow_input_{name}")
    if kind == "text":
        return gr.Textbox(label=label, elem_id=f"appflow_input_{name}")
    if kind == "texts":
        return gr.Textbox(label=label + ": one per line", lines=3, elem_id=f"appflow_input_{name}")
    if kind == "flag":
        return gr.Checkbox(label=label, elem_id=f"appflow_input_{name}")
    return None


def widget_value(port: str, value):
    """The app input for a widget value (texts: one per line; empty optional values are left out)."""
    kind = port.rstrip("?")
    if kind == "texts":
        return [line.strip() for line in (value or "").splitlines() if line.strip()] or None
    if kind == "images":
        return [item[0] if isinstance(item, (tuple, list)) else item for item in value] if value else None
    if kind == "text":
        return value or None
    return value


def run_app(state: ServerState, name: str, ports: dict, widget_names: list[str], values: list, task_id, request,
            cache_dir, option_names: list[str] = (), option_values: list = ()):
    """The Run button's handler: the form's values as app inputs (a required one missing is refused) and its options
    (held to this server's caps as over HTTP, then to the app's own checks: a bad value is refused before anything
    is queued), queued as a task under the page's task id and followed (`follow_appflow`); the run goes on when the
    page goes away."""
    from appflow.apps import check_app_option_values
    from webui.appflow_io import check_app_options

    inputs = {n: widget_value(ports[n], v) for n, v in zip(widget_names, values)}
    inputs = {n: v for n, v in inputs.items() if v is not None}
    missing = [n for n, p in ports.items() if not p.endswith("?") and n not in inputs]
    if missing:
        raise refused(f"Fill in the required input(s): {', '.join(missing)}.")
    try:
        description = state.describe_app(name)
        options = options_from_values(description, list(option_names), list(option_values))
        check_app_options(options, state.limits, state.lora_names())
        # also against the server's models (their configs): a transcription the audio model cannot read
        check_app_option_values(name, options, {role: m["source"] for role, m in description["models"].items()})
        task_id = checked_task_id(state, task_id)
        job = state.submit_app(name, inputs, options or None, session=getattr(request, "session_hash", None),
                               keep_on_disconnect=True)
    except (ValueError, TypeError, QueueFullError) as error:  # bad input, queue full: show it
        raise refused(f"{name} failed: {error}") from None
    # a missing model or one that failed is the task's failure: "<app> failed: ..." (`webui.ui.reattach`)
    task = registered_task(state, task_id, "appflow", job, request, appflow_finish(name, cache_dir), label=name)
    yield from follow_appflow(state, task)


def build_appflow_tab(state: ServerState) -> FollowedTab:
    """Create the tab; returns what a loading page needs to follow its run."""
    from appflow import APPS

    names = APPS.names()
    app = gr.Dropdown(names, value=names[0] if names else None, label="App", elem_id="appflow_app")
    # The options this page set, per app ({app: {option: widget value}}): a switch back shows them again
    saved_options = gr.State({})
    # Outside the app's form (rendered below it), so a page that loads can show a run's progress and outputs in them
    progress = gr.HTML(progress_html(0, "Idle"), elem_id="appflow_progress", render=False)
    gallery = gr.Gallery(label="Images", format="png", interactive=False, elem_id="appflow_images", render=False)
    # an audio app's clip (a .wav written when the run ends) plays here; empty for the other apps
    audio = gr.Audio(label="Audio", type="filepath", interactive=False, elem_id="appflow_audio", render=False)
    # a batch's clips (`clips per prompt` > 1): picking one plays it in the player above
    clips = gr.Radio(label="Clips (pick one to play it)", choices=[], visible=False, elem_id="appflow_audio_clips",
                     render=False)
    result = gr.JSON(label="Outputs", elem_id="appflow_outputs", render=False)
    task_box = task_box_for("appflow", render=False)
    outputs = [progress, gallery, audio, clips, result, task_box]

    # Re-rendered when the app changes (and on load), not when an option is remembered: the form is read, not redrawn
    @gr.render(inputs=[app, saved_options], triggers=[app.change, gr.context.get_blocks_context().root_block.load])
    def app_form(name: str, saved: dict):
        if not name:
            return
        description = state.describe_app(name)
        models = ", ".join(f"{role}: {m['source']}" for role, m in description["models"].items())
        gr.Markdown(f"**{name}**: {description['description']}  \nModels: {models}")
        ports = description["inputs"]
        # The inputs get their own Column: Gradio wraps consecutive form widgets (Textbox, Checkbox...) in a
        # hidden "form" block, and when that block sat directly in the render container next to an Image
        # (switching {prompt} -> {image, prompt}), Gradio 6's page failed to patch the new layout (a
        # TypeError in Gallery) and kept showing the old form. Inside a Column every switch renders.
        with gr.Column(elem_id="appflow_inputs"):
            masks = set(description.get("mask_inputs", ()))
            widgets = {n: w for n, p in ports.items() if (w := input_widget(n, p, mask=n in masks)) is not None}
        options = build_option_widgets(description, (saved or {}).get(name, {}), state.limits, result)
        for option, widget in options.items():
            widget.change(remember_option(name, option), inputs=[saved_options, widget], outputs=saved_options,
                          queue=False)
        run = gr.Button("Run", variant="primary", elem_id="appflow_run")

        def execute(request: gr.Request, *values_and_task_id):
            *values, task_id = values_and_task_id
            inputs, chosen = values[:len(widgets)], values[len(widgets):]
            yield from run_app(state, name, ports, list(widgets), inputs, task_id, request, gallery.GRADIO_CACHE,
                               list(options), chosen)

        # the input widgets, then the option widgets (in `describe_app()["option_specs"]` order), the task id last
        inputs = [*widgets.values(), *options.values(), task_box]
        run.click(redacting(execute, state), inputs=inputs, outputs=outputs, concurrency_limit=None,
                  js=submit_js(len(inputs)))

    # Outside the app's form, so it stays while the form is rebuilt; stops the run the tab follows (an SD step at its
    # next sampling step, `appflow.progress`), also one started before a reload
    interrupt = gr.Button("Interrupt", elem_id="appflow_interrupt")
    for component in outputs:
        component.render()
    interrupt.click(interrupt_own_job(state), inputs=[task_box], queue=False)
    clips.input(clip_player(gallery.GRADIO_CACHE), inputs=[clips], outputs=[audio], queue=False)
    return FollowedTab("appflow", task_box, outputs, lambda task: follow_appflow(state, task))
