"""Settings > Stable Diffusion checkpoint: the dropdown's choices follow the catalog's titles.

A1111 (modules/sd_models.py) titles a checkpoint `name [shorthash]` once its sha256 is known and refreshes the
list after hashing (`list_models`, the 🔄 button's `refresh_checkpoints`), so the selected title is always one of
the choices. A title that gains its hash at load must therefore reach the dropdown's choices, or Gradio refuses
the next event that reads the dropdown ("Value: ... is not in the list of choices").
"""

from __future__ import annotations

import hashlib

import pytest

from .ui_blocks import component, handler, page_props


class HashingPipeline:
    """Stands in for a loaded model: loading hashes the file, as the real loader does for the infotext's hash."""

    native_size = 64  # what a switch reads to re-adopt the size defaults

    def __init__(self, source: str) -> None:
        from mixkit.io.hashing import a1111_model_hash

        a1111_model_hash(source)
        self.model = self


@pytest.fixture()
def built(tmp_path, monkeypatch):
    from webui.config import ServerConfig
    from webui.model_switch import ModelHolder
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "cache"))
    models = tmp_path / "models"
    models.mkdir()
    (models / "a.safetensors").write_bytes(b"first model")
    (models / "b.safetensors").write_bytes(b"second model")
    state = ServerState(ServerConfig(models_dir=str(models), output_dir=str(tmp_path / "out")))
    state.holder = ModelHolder(state.catalog, loader=lambda source, preset: HashingPipeline(source))
    yield state, build_ui(state)
    state.close()


def choice_values(dropdown) -> list:
    choices = dropdown["choices"] if isinstance(dropdown, dict) else dropdown.choices
    return [value for _, value in choices]


def test_a_load_puts_the_hashed_title_into_the_choices_and_a_page_served_keeps_it(built):
    state, blocks = built
    hashed = f"b.safetensors [{hashlib.sha256(b'second model').hexdigest()[:10]}]"
    before = page_props(blocks, "settings_checkpoint")
    assert choice_values(before) == ["a.safetensors", "b.safetensors"] and before["value"] is None

    status, after_load, *sizes = handler(blocks, "settings_load_checkpoint", "click").fn("b.safetensors")
    assert state.model_title == hashed and hashed in status
    # the size defaults as the server holds them after the switch (they follow a model's native size)
    assert sizes == [state.options.get("default_width"), state.options.get("default_height")]
    assert after_load.value == hashed and choice_values(after_load) == ["a.safetensors", hashed]

    reloaded = page_props(blocks, "settings_checkpoint")  # a page opened (or reloaded) after the load
    assert reloaded["value"] == hashed and choice_values(reloaded) == ["a.safetensors", hashed]
    dropdown = component(blocks, "settings_checkpoint")
    assert dropdown.preprocess(hashed) == hashed  # Gradio passes it on for the next Load (not its build-time choices)
    # a page opened before the load still names the file without its hash, which loads the same checkpoint
    status, after_old_title, *_ = handler(blocks, "settings_load_checkpoint", "click").fn("b.safetensors")
    assert state.model_title == hashed and after_old_title.value == hashed


def test_a_title_that_is_no_checkpoint_is_refused_and_the_model_stays(built):
    import gradio as gr

    state, blocks = built
    handler(blocks, "settings_load_checkpoint", "click").fn("a.safetensors")
    loaded = state.model_title
    with pytest.raises(gr.Error, match="typo.safetensors"):
        handler(blocks, "settings_load_checkpoint", "click").fn("typo.safetensors")
    assert state.model_title == loaded


def test_no_page_load_event_sets_the_checkpoint_dropdown(built):
    """A page-load event landed after the page was usable and replaced a checkpoint chosen in the meantime."""
    _, blocks = built
    target = component(blocks, "settings_checkpoint")
    assert not [f for f in blocks.fns.values() if any(t[1] == "load" for t in f.targets)
                and target._id in [o._id for o in f.outputs]]


def test_refresh_lists_new_files_and_keeps_the_loaded_title(built):
    state, blocks = built
    handler(blocks, "settings_load_checkpoint", "click").fn("a.safetensors")
    (state.catalog.models_dir / "c.safetensors").write_bytes(b"third model")
    refreshed = handler(blocks, "settings_refresh_checkpoints", "click").fn()
    hashed = f"a.safetensors [{hashlib.sha256(b'first model').hexdigest()[:10]}]"
    assert refreshed.value == hashed and choice_values(refreshed) == [hashed, "b.safetensors", "c.safetensors"]
