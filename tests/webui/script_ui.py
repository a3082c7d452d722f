"""Drive a selectable script's controls in a built web UI, as a page would: the form's values, the script State the
controls' change handler makes, and Generate's last output, on txt2img or img2img (for tests of
webui/ui/script_*.py)."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from .ui_blocks import component, handler


def _values(inputs, changes: dict, tab: str = "txt2img") -> list:
    values = []
    for block in inputs:
        name = (block.elem_id or "").removeprefix(f"{tab}_")
        values.append(changes.pop(name) if name in changes else block.value)
    assert not changes, f"no such inputs: {changes}"
    return values


def _tab_script_choice(blocks, tab: str, changes: dict):
    dropdown = component(blocks, f"{tab}_script")
    (fn,) = [f for f in blocks.fns.values() if (dropdown._id, "change") in [tuple(t) for t in f.targets]
             and len(f.outputs) == 1 and isinstance(f.outputs[0], gr.State)]
    return fn.fn(*_values(fn.inputs, changes, tab))


def script_choice(blocks, **changes):
    """The page's script State after the Script controls changed to `changes` (by elem_id without "txt2img_")."""
    return _tab_script_choice(blocks, "txt2img", changes)


def img2img_script_choice(blocks, **changes):
    """The img2img script State after its controls changed to `changes` (by elem_id without "img2img_")."""
    return _tab_script_choice(blocks, "img2img", changes)


def img2img_generate(blocks, session: str, script_changes: dict, **changes):
    """img2img Generate's last update, every input as a fresh page sends it with `changes`, the Script as chosen
    (`script_changes`, as for `img2img_script_choice`)."""
    run = handler(blocks, "img2img_generate", "click")
    changes = {"task_id": "", "script_choice": img2img_script_choice(blocks, **script_changes), **changes}
    values = _values(run.inputs, changes, "img2img")
    request = SimpleNamespace(session_hash=session, request=SimpleNamespace(scope={}))
    return list(run.fn(request, *values))[-1]


def generate(blocks, prefix: str, script: str = "None", **changes):
    """txt2img Generate's last output with the form's fields and the script's controls (names starting `prefix`)
    changed."""
    request = SimpleNamespace(session_hash=f"{prefix}ui", request=SimpleNamespace(scope={}))
    form = {name: changes.pop(name) for name in list(changes) if not name.startswith(prefix)}
    values = _values(handler(blocks, "txt2img_generate", "click").inputs, form)
    values[-2] = script_choice(blocks, script=script, **changes)  # the script State, before the task box
    return list(handler(blocks, "txt2img_generate", "click").fn(request, *values))[-1]
