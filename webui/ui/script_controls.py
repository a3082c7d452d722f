"""A1111's "Script" dropdown at the bottom of txt2img and img2img, and one control group per selectable script.

A script's UI is a `ScriptUi` in `SCRIPT_UIS` (registered by its own `webui/ui/script_<name>.py`, listed in
`SCRIPT_UI_MODULES`): `build(kind, state)` makes its controls inside a hidden group and returns them with a function
from their values to A1111's positional `script_args`. Every change of the dropdown or of a script's control keeps
`ScriptControls.choice` (a per-page State: None, or [title, script_args]) up to date, and Generate takes that one
State, so adding a script never changes Generate's inputs. The script's args are then checked by the script itself
(`pipelines.scripts`), exactly as an API request's are.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

import gradio as gr

from mixkit.registry import Registry

NO_SCRIPT = "None"
SCRIPT_UI_MODULES = (
    "webui.ui.script_prompt_matrix",
    "webui.ui.script_prompts_from_file",
    "webui.ui.script_xyz",
    "webui.ui.script_loopback",
    "webui.ui.script_sd_upscale",
)


@dataclass(frozen=True)
class ScriptUi:
    """`build(kind, state) -> (components, to_script_args)` for the script titled `title` (pipelines.scripts)."""

    title: str
    build: Callable[[str, Any], tuple[list, Callable[[list], list]]]


SCRIPT_UIS: Registry[ScriptUi] = Registry("script UI")


def register_script_ui(script_ui: ScriptUi) -> ScriptUi:
    SCRIPT_UIS.register(script_ui.title, script_ui)
    return script_ui


@dataclass
class ScriptControls:
    """The dropdown and every script's controls; `inputs` go to Generate in this order."""

    dropdown: Any
    choice: Any = None  # gr.State: None, or [title, script_args] of the chosen script as its controls are now
    groups: dict = field(default_factory=dict)  # title -> (group, components, to_script_args)

    @property
    def inputs(self) -> list:
        return [self.dropdown, *(component for _, components, _ in self.groups.values() for component in components)]

    def selected(self, values: list) -> list | None:
        """[title, script_args] for the chosen script from `inputs`' values, or None for "None"."""
        title, rest = values[0], list(values[1:])
        chosen = None
        for name, (_, components, to_args) in self.groups.items():
            own, rest = rest[:len(components)], rest[len(components):]
            if name == title:
                chosen = [name, to_args(own)]
        if title not in (None, "", NO_SCRIPT) and chosen is None:
            raise ValueError(f"Script {title!r} is not one of {NO_SCRIPT!r}, "
                             f"{', '.join(repr(name) for name in self.groups)}.")
        return chosen


def build_script_controls(kind: str, state) -> ScriptControls:
    """The Script dropdown (default "None") and, below it, each script's group, shown when it is chosen."""
    from pipelines.scripts import SCRIPTS

    for module in SCRIPT_UI_MODULES:
        importlib.import_module(module)
    titles = [script.title for _, script in SCRIPTS.items() if kind in script.kinds and script.title in SCRIPT_UIS]
    dropdown = gr.Dropdown([NO_SCRIPT, *titles], value=NO_SCRIPT, label="Script", elem_id=f"{kind}_script")
    controls = ScriptControls(dropdown, gr.State(None))
    controls.choice.elem_id = f"{kind}_script_choice"  # a name for code that reads Generate's inputs by elem_id
    for title in titles:
        with gr.Group(visible=False) as group:
            components, to_args = SCRIPT_UIS.get(title).build(kind, state)
        controls.groups[title] = (group, components, to_args)
    groups = [group for group, _, _ in controls.groups.values()]
    dropdown.change(lambda chosen: [gr.update(visible=name == chosen) for name in controls.groups],
                    inputs=dropdown, outputs=groups, queue=False)
    for component in controls.inputs:
        component.change(lambda *values: controls.selected(list(values)), inputs=controls.inputs,
                         outputs=controls.choice, queue=False)
    return controls
