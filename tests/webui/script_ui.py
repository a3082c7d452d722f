"""Drive a selectable script's controls in a built web UI, as a page would: the form's values, the script State the
controls' change handler makes, and Generate's last output (for tests of webui/ui/script_*.py)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import gradio as gr

from .ui_blocks import component, handler


@contextlib.contextmanager
def built_ui(model_dir, root):
    """(ServerState, Blocks) on the model in `model_dir`, outputs under `root`, closed afterwards."""
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    state = ServerState(ServerConfig(models=[str(model_dir)], output_dir=str(root / "out"), ui=False))
    state.load_initial_model()
    try:
        yield state, build_ui(state)
    finally:
        state.close()


def _values(inputs, changes: dict) -> list:
    values = []
    for block in inputs:
        name = (block.elem_id or "").removeprefix("txt2img_")
        values.append(changes.pop(name) if name in changes else block.value)
    assert not changes, f"no such inputs: {changes}"
    return values


def script_choice(blocks, **changes):
    """The page's script State after the Script controls changed to `changes` (by elem_id without "txt2img_")."""
    dropdown = component(blocks, "txt2img_script")
    (fn,) = [f for f in blocks.fns.values() if (dropdown._id, "change") in [tuple(t) for t in f.targets]
             and len(f.outputs) == 1 and isinstance(f.outputs[0], gr.State)]
    return fn.fn(*_values(fn.inputs, changes))


def generate(blocks, prefix: str, script: str = "None", **changes):
    """txt2img Generate's last output with the form's fields and the script's controls (names starting `prefix`)
    changed."""
    request = SimpleNamespace(session_hash=f"{prefix}ui", request=SimpleNamespace(scope={}))
    form = {name: changes.pop(name) for name in list(changes) if not name.startswith(prefix)}
    values = _values(handler(blocks, "txt2img_generate", "click").inputs, form)
    values[-2] = script_choice(blocks, script=script, **changes)  # the script State, before the task box
    return list(handler(blocks, "txt2img_generate", "click").fn(request, *values))[-1]
