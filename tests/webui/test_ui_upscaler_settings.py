"""Settings > Upscaling: the ESRGAN tile sliders set the options and retile the model upscalers; a bad pair is refused."""

from __future__ import annotations

import gradio as gr
import pytest

from mixkit.testing.tiny_upscalers import TINY_RRDB, save_upscaler, tiny_upscaler
from pipelines.upscale import UPSCALERS

from .ui_blocks import component, handler


@pytest.fixture()
def built(tmp_path):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    (tmp_path / "models").mkdir(), (tmp_path / "ESRGAN").mkdir()
    save_upscaler(tiny_upscaler(TINY_RRDB), tmp_path / "ESRGAN" / "ESRGAN_4x.pth", "esrgan")
    state = ServerState(ServerConfig(models_dir=str(tmp_path / "models"), output_dir=str(tmp_path / "out"),
                                     esrgan_models_path=str(tmp_path / "ESRGAN")))
    try:
        yield state, build_ui(state)
    finally:
        state.close()


def test_the_sliders_set_the_options_and_every_model_upscaler(built):
    state, blocks = built
    assert component(blocks, "settings_ESRGAN_tile").value == 192  # A1111's defaults
    assert component(blocks, "settings_ESRGAN_tile_overlap").value == 8
    apply = handler(blocks, "settings_apply_upscaling", "click").fn
    assert apply(256.0, 16.0) == "Settings applied."
    assert (state.options.get("ESRGAN_tile"), state.options.get("ESRGAN_tile_overlap")) == (256, 16)
    entry = UPSCALERS.get("ESRGAN_4x")
    assert (entry.tile_size, entry.tile_overlap) == (256, 16)
    with pytest.raises(gr.Error, match=r"tile_overlap must be an integer in \[0, 7\] for tile_size 16"):
        apply(16.0, 8.0)
    assert (entry.tile_size, entry.tile_overlap) == (256, 16)
