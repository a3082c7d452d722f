"""AppFlow: pick an app; its input widgets are generated from the app's declared input ports."""

from __future__ import annotations

import gradio as gr

from webui.server_state import ServerState
from webui.ui.errors import failed, redacting, refused
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


def build_appflow_tab(state: ServerState) -> None:
    from appflow import APPS

    from webui.appflow_io import encode_app_output, output_images

    names = APPS.names()
    app = gr.Dropdown(names, value=names[0] if names else None, label="App", elem_id="appflow_app")

    @gr.render(inputs=app)
    def app_form(name: str):
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
        run = gr.Button("Run", variant="primary", elem_id="appflow_run")
        gallery = gr.Gallery(label="Images", format="png", interactive=False, elem_id="appflow_images")
        result = gr.JSON(label="Outputs", elem_id="appflow_outputs")

        def execute(request: gr.Request, *values):
            inputs = {n: widget_value(ports[n], v) for n, v in zip(widgets, values)}
            inputs = {n: v for n, v in inputs.items() if v is not None}
            missing = [n for n, p in ports.items() if not p.endswith("?") and n not in inputs]
            if missing:
                raise refused(f"Fill in the required input(s): {', '.join(missing)}.")
            try:
                session = getattr(request, "session_hash", None)  # dropped if the tab closes
                outputs = state.submit_app(name, inputs, session=session).future.result()
            except (ValueError, TypeError, QueueFullError) as error:  # bad input, queue full: show it
                raise refused(f"{name} failed: {error}") from None
            except Exception as error:  # missing model, a model that failed: show it, keep the UI alive
                raise failed(f"{name} failed: {error}", error) from None
            text_outputs = {k: v for k, v in outputs.items() if k != "result"}
            return output_images(outputs), {k: encode_app_output(v) for k, v in text_outputs.items()
                                            if not output_images({k: v})}

        run.click(redacting(execute, state), inputs=list(widgets.values()), outputs=[gallery, result])
