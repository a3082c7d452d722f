"""Build the web UI on a model and reach into the Gradio Blocks app: a component by elem_id, and the handler an
event of it runs."""

from __future__ import annotations

import contextlib


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


def component(blocks, elem_id: str):
    found = [block for block in blocks.blocks.values() if getattr(block, "elem_id", None) == elem_id]
    assert len(found) == 1, elem_id
    return found[0]


def handler(blocks, elem_id: str, event: str):
    target = component(blocks, elem_id)
    (fn,) = [f for f in blocks.fns.values() if (target._id, event) in [tuple(t) for t in f.targets]]
    return fn


def page_value(blocks, elem_id: str):
    """The value a page served now starts the component at (`webui.ui.page_values` writes it into Gradio's config)."""
    return page_props(blocks, elem_id)["value"]


def page_props(blocks, elem_id: str) -> dict:
    """The props (value, choices, ...) a page served now starts the component with."""
    import copy

    target = component(blocks, elem_id)
    config = copy.deepcopy(blocks.config)
    blocks.mixkit_page_values.write_into(config)
    (entry,) = [entry for entry in config["components"] if entry["id"] == target._id]
    return entry["props"]


@contextlib.contextmanager
def model_less_ui(root):
    """A ServerState with an empty models folder (no model is loaded) and its built Blocks, closed afterwards."""
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    (root / "models").mkdir()
    state = ServerState(ServerConfig(models_dir=str(root / "models"), output_dir=str(root / "out")))
    try:
        yield state, build_ui(state)
    finally:
        state.close()
