"""The AppFlow tab's options form: one widget per option the app declares a spec for (`describe_app()["option_specs"]`),
bounded by the spec and by this server's caps, its values turned back into the app's options.

The widgets only translate: the values go through `webui.appflow_io.check_app_options` (the server's caps, as over
HTTP) and the app's own option checks before the run is queued, so a stale page or a gradio_client caller meets the
same limits as a browser. A slider covers a range a hand can sweep, a number box a wide one (seeds); a number the
model chooses when left out ("auto": steps, size, clip length) is a text box, empty for the model's choice: Gradio 6's
page sends an empty number box as 0, which the checks then refused ("audio_length_in_s ... got 0").
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from webui.ui.form_components import form_number, form_slider

AUTO_CHOICE = "Automatic (the model's)"  # a dropdown's entry for an option whose None means "the model chooses"
SLIDER_MAX_STOPS = 2000  # wider ranges get a number box: a slider's pixels could not pick single values


def server_caps(limits) -> dict[str, float]:
    """This server's caps on app options, as `check_app_options` applies them over HTTP: the top of each widget."""
    from webui.appflow_audio import HTTP_MAX_AUDIO_SECONDS
    from webui.appflow_io import FRAMES_PER_BATCH_LIMIT, HTTP_MAX_NEW_TOKENS

    return {"steps": limits.max_steps, "batch_size": limits.max_batch_size, "batch_count": limits.max_batch_count,
            "num_frames": limits.max_batch_size * FRAMES_PER_BATCH_LIMIT, "audio_length_in_s": HTTP_MAX_AUDIO_SECONDS,
            "width": limits.max_side, "height": limits.max_side, "max_new_tokens": HTTP_MAX_NEW_TOKENS,
            "cfg_scale": limits.max_cfg_scale}


def widget_bounds(name: str, spec: dict, caps: dict[str, float]) -> tuple[float | None, float | None]:
    """The widget's range: the spec's, its top lowered to the server's cap."""
    low, high = spec["low"], spec["high"]
    if name in caps:
        high = caps[name] if high is None else min(high, caps[name])
    return low, high


def option_label(name: str, spec: dict) -> str:
    return f"{spec['label'] or name} ({name})"


def option_widget(name: str, spec: dict, value: Any, caps: dict[str, float]):
    """One option's widget holding `value` (its default, or what this page last set for the app)."""
    # interactive: Gradio decides it from the events that read a component, which a rendered form's page may learn
    # late (a slider came up disabled in Chromium)
    elem_id, interactive = f"appflow_option_{name}", True
    label = option_label(name, spec)
    kind = spec["kind"]
    if kind == "bool":
        return gr.Checkbox(value=bool(value), label=label, elem_id=elem_id, interactive=interactive)
    if kind == "text":
        return gr.Textbox(value=value or "", label=label, elem_id=elem_id, interactive=interactive)
    if kind == "choice":
        choices = ([AUTO_CHOICE] if spec["auto"] else []) + list(spec["choices"])
        return gr.Dropdown(choices, value=AUTO_CHOICE if value is None else value, label=label, elem_id=elem_id,
                           interactive=interactive)
    low, high = widget_bounds(name, spec, caps)
    if spec["auto"]:
        opening = "(" if spec["low_open"] else "["
        bounds = f" {opening}{_plain(low)}, {_plain(high)}]" if low is not None and high is not None else \
            f" >{'' if spec['low_open'] else '='} {_plain(low)}" if low is not None else ""
        return gr.Textbox(value="" if value is None else str(value), label=f"{label}{bounds}",
                          placeholder="empty: the model's choice", elem_id=elem_id, interactive=interactive)
    step = spec["step"] or (1 if kind in ("int", "seed") else 0.01)
    precision = 0 if kind in ("int", "seed") else None
    narrow = low is not None and high is not None and (high - low) / step <= SLIDER_MAX_STOPS
    if kind != "seed" and narrow:
        # a slider cannot leave out its low end: an open one ((0, 240] fps) starts a step above it; a number box
        # takes any value up from it, the check refusing the low end itself with its message
        low = low + step if spec["low_open"] else low
        return form_slider(low, high, value=value, step=step, label=label, elem_id=elem_id, interactive=interactive)
    return form_number(value=value, minimum=low, maximum=high, precision=precision, step=step, label=label,
                       elem_id=elem_id, interactive=interactive)


def _plain(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def auto_number(name: str, spec: dict, value: Any) -> Any:
    """An "auto" number box's text as the option: empty is None (the model chooses), else the number it holds."""
    if not isinstance(value, str):
        return value  # a gradio_client caller's number (or None): the checks judge it
    text = value.strip()
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"option {name} must be {'an integer' if spec['kind'] != 'float' else 'a number'} or empty "
                         f"(the model's choice), got {value!r}.") from None
    return int(number) if spec["kind"] != "float" and number.is_integer() else number


def option_value(name: str, spec: dict, value: Any, default: Any) -> Any:
    """The option a widget's value stands for: the Automatic entry and an empty "auto" box are None (the model
    chooses), an empty seed box is -1 (random, as A1111), another empty box the default; integers as int."""
    if spec["kind"] == "choice":
        return None if value == AUTO_CHOICE else value
    if spec["auto"] and spec["kind"] in ("int", "seed", "float"):
        value = auto_number(name, spec, value)
    if spec["kind"] in ("int", "seed", "float") and value is None:
        return None if spec["auto"] else (-1 if spec["kind"] == "seed" else default)
    if spec["kind"] in ("int", "seed") and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def options_from_values(description: dict, names: list[str], values: list) -> dict[str, Any]:
    """The options the form sets to other than their defaults (the app's own defaults apply to the rest); an option
    the app's form does not have (a page from before the server changed) is a ValueError naming the form's options."""
    specs, defaults = description["option_specs"], description["options"]
    unknown = sorted(set(names) - set(specs))
    if unknown:
        raise ValueError(f"app {description.get('name', '')!r} has no form option(s) {unknown}; its form has "
                         f"{list(specs)}. Reload the page.")
    chosen = {name: option_value(name, specs[name], value, defaults[name]) for name, value in zip(names, values)}
    return {name: value for name, value in chosen.items() if value != defaults[name]}


def last_seed(outputs: Any) -> int | None:
    """The seed of the tab's last run (its first image's, or the clip's / video's), for the recycle button."""
    if not isinstance(outputs, dict):
        return None
    seeds = outputs.get("seeds")
    if isinstance(seeds, list) and seeds and isinstance(seeds[0], int):
        return seeds[0]
    seed = outputs.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 else None


def build_option_widgets(description: dict, saved: dict, limits, result) -> dict[str, Any]:
    """The app's option widgets (name -> component) in an "Options" accordion, holding `saved` values where this page
    set them; a seed gets a Random (-1) and a Reuse (the last run's seed, read from `result`) button."""
    caps = server_caps(limits)
    specs = description["option_specs"]
    widgets: dict[str, Any] = {}
    if not specs:
        return widgets
    with gr.Accordion("Options", open=True, elem_id="appflow_options"):
        for name, spec in specs.items():
            value = saved.get(name, description["options"][name])
            if spec["kind"] != "seed":
                widgets[name] = option_widget(name, spec, value, caps)
                continue
            with gr.Row(equal_height=True):
                widgets[name] = option_widget(name, spec, value, caps)
                dice = gr.Button("Random", elem_id=f"appflow_random_{name}", scale=0, min_width=90)
                # the run's outputs hold its seed; a variation seed is not among them
                recycle = gr.Button("Reuse", elem_id="appflow_reuse_seed", scale=0, min_width=90) \
                    if name == "seed" else None
            dice.click(lambda: -1, outputs=widgets[name], queue=False)
            if recycle is not None:
                recycle.click(reused_seed, inputs=result, outputs=widgets[name], queue=False)
    return widgets


def reused_seed(outputs: Any):
    """The Reuse button: the last run's seed, or the box left as it is when the tab has shown no run."""
    seed = last_seed(outputs)
    return gr.skip() if seed is None else seed


def remember_option(app: str, name: str):
    """A widget's change handler: its value kept in the page's per-app memory, so switching apps and back keeps it."""
    def remember(saved: dict, value):
        saved = dict(saved or {})
        saved[app] = {**saved.get(app, {}), name: value}
        return saved

    return remember
