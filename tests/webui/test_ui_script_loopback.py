"""Loopback's controls under img2img's Script dropdown (webui/ui/script_loopback.py), driven through the built
Blocks' own handlers on the tiny model."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pytest
from PIL import Image

from pipelines.infotext import parse_infotext

from .ui_blocks import component, handler


@pytest.fixture(scope="module")
def built(tiny_sd1_dir, tmp_path_factory):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-loopback")
    state = ServerState(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "out"), ui=False))
    state.load_initial_model()
    try:
        yield state, build_ui(state)
    finally:
        state.close()


def script_choice(blocks, **changes):
    """The img2img script State after its controls changed to `changes` (by elem_id without "img2img_")."""
    dropdown = component(blocks, "img2img_script")
    (fn,) = [f for f in blocks.fns.values() if (dropdown._id, "change") in [tuple(t) for t in f.targets]
             and len(f.outputs) == 1 and isinstance(f.outputs[0], gr.State)]
    values = [changes.pop((block.elem_id or "").removeprefix("img2img_"), block.value) for block in fn.inputs]
    assert not changes, f"no such inputs: {changes}"
    return fn.fn(*values)


def generate(blocks, script_changes, **changes):
    """img2img Generate's last update, every input as a fresh page sends it with `changes`, the Script as chosen."""
    run = handler(blocks, "img2img_generate", "click")
    picture = Image.new("RGB", (64, 64), (200, 30, 30))
    changes = {"prompt": "a red cat", "steps": 2, "width": 64, "height": 64, "seed": 4, "sampler": "Euler",
               "task_id": "", "image": {"background": picture, "layers": [], "composite": picture},
               "script_choice": script_choice(blocks, **script_changes), **changes}
    values = [changes.pop((block.elem_id or "").removeprefix("img2img_"), block.value) for block in run.inputs]
    assert not changes, f"no such inputs: {changes}"
    request = SimpleNamespace(session_hash="loopback-ui", request=SimpleNamespace(scope={}))
    return list(run.fn(request, *values))[-1]


def test_loopback_is_offered_on_img2img_only_with_a1111s_defaults(built):
    _, blocks = built
    assert "Loopback" in [choice[0] for choice in component(blocks, "img2img_script").choices]
    assert "Loopback" not in [choice[0] for choice in component(blocks, "txt2img_script").choices]
    loops = component(blocks, "img2img_loopback_loops")
    assert (loops.value, loops.minimum, loops.maximum, loops.step) == (4, 1, 32, 1)
    assert script_choice(blocks, script="Loopback") == ["Loopback", [4, 0.5, "Linear", "None"]]
    assert script_choice(blocks, script="Loopback", loopback_loops=3.0, loopback_curve="Lazy")[1] == [
        3, 0.5, "Lazy", "None"]


def test_generate_shows_the_grid_then_each_loop(built):
    _, blocks = built
    last = generate(blocks, {"script": "Loopback", "loopback_loops": 2.0,
                             "loopback_final_denoising_strength": 0.25}, denoising_strength=0.75)
    gallery, infotexts = last[2], last[4]
    assert len(gallery) == 3
    with Image.open(gallery[0][0]) as grid:
        assert grid.size == (128, 64)
    assert [parse_infotext(text)["Denoising strength"] for text in infotexts[1:]] == ["0.75", "0.25"]


def test_deepbooru_is_refused_with_the_reason(built):
    state, blocks = built
    with pytest.raises(gr.Error, match="needs a DeepBooru tagger .* --deepdanbooru-models-path"):
        generate(blocks, {"script": "Loopback", "loopback_append_interrogation": "DeepBooru"})
    assert state.worker.queued == 0
