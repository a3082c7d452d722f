"""A model switch re-adopts the size defaults the user has not chosen (report webui2 #4 A)."""

from __future__ import annotations

import json


class NativePipeline:
    def __init__(self, native_size: int) -> None:
        self.native_size = native_size
        self.model = self


def test_a_switch_makes_the_unchosen_size_defaults_the_new_models_native_size(tmp_path):
    from webui.config import ServerConfig
    from webui.model_switch import ModelHolder
    from webui.server_state import ServerState

    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny.safetensors").write_bytes(b"tiny")
    (models / "m128.safetensors").write_bytes(b"m128")
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"default_height": 96}))  # the user's own choice: it stays
    state = ServerState(ServerConfig(models_dir=str(models), output_dir=str(tmp_path / "out"),
                                     settings_file=str(settings)))
    native = {"tiny": 64, "m128": 128}
    state.holder = ModelHolder(state.catalog, loader=lambda source, preset: NativePipeline(
        native[source.rsplit("/", 1)[-1].split(".")[0]]))
    try:
        state.submit_model_switch("tiny.safetensors").future.result(30)
        state.options.adopt_native_size(64)  # what start-up does after its first load
        assert (state.generation_defaults().width, state.generation_defaults().height) == (64, 96)
        state.submit_model_switch("m128.safetensors").future.result(30)
        assert (state.generation_defaults().width, state.generation_defaults().height) == (128, 96)
        assert "default_width" not in json.loads(settings.read_text())
    finally:
        state.close()
