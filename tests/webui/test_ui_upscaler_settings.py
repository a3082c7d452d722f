"""Settings > Upscaling: the ESRGAN / SwinIR / DAT tile sliders set their options and retile the model upscalers they
apply to; the SwinIR compile box sets SWIN_torch_compile; a bad pair is refused."""

from __future__ import annotations

import gradio as gr
import pytest

from mixkit.testing.tiny_upscalers import TINY_DAT, TINY_RRDB, TINY_SCUNET, TINY_SWINIR, save_upscaler, tiny_upscaler
from pipelines.upscale import UPSCALERS

from .ui_blocks import component, handler


@pytest.fixture()
def built(tmp_path):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    (tmp_path / "models").mkdir(), (tmp_path / "ESRGAN").mkdir()
    save_upscaler(tiny_upscaler(TINY_RRDB), tmp_path / "ESRGAN" / "ESRGAN_4x.pth", "esrgan")
    save_upscaler(tiny_upscaler(TINY_SWINIR), tmp_path / "ESRGAN" / "SwinIR_4x.pth", "swinir")
    save_upscaler(tiny_upscaler(TINY_DAT), tmp_path / "ESRGAN" / "DAT_x2.pth", "dat")
    save_upscaler(tiny_upscaler(TINY_SCUNET), tmp_path / "ESRGAN" / "scunet_color_real_gan.pth", "scunet")
    state = ServerState(ServerConfig(models_dir=str(tmp_path / "models"), output_dir=str(tmp_path / "out"),
                                     esrgan_models_path=str(tmp_path / "ESRGAN")))
    try:
        yield state, build_ui(state)
    finally:
        state.close()


def tiles(name):
    entry = UPSCALERS.get(name)
    return entry.tile_size, entry.tile_overlap


def test_the_sliders_set_the_options_and_the_model_upscalers_they_apply_to(built):
    state, blocks = built
    for option in ("ESRGAN", "SWIN", "DAT"):  # A1111's defaults
        assert component(blocks, f"settings_{option}_tile").value == 192
        assert component(blocks, f"settings_{option}_tile_overlap").value == 8
    assert component(blocks, "settings_SWIN_tile").minimum == 16 and component(blocks, "settings_DAT_tile").minimum == 0
    assert component(blocks, "settings_SCUNET_tile").value == 256 and component(blocks, "settings_SCUNET_tile_overlap").value == 8
    assert component(blocks, "settings_SCUNET_tile_overlap").maximum == 64  # A1111's ScuNET slider
    assert component(blocks, "settings_SWIN_torch_compile").value is False
    assert component(blocks, "settings_dat_enabled_models").value == ["DAT x2", "DAT x3", "DAT x4"]  # A1111's default
    apply = handler(blocks, "settings_apply_upscaling", "click").fn
    assert apply(256.0, 16.0, 64.0, 4.0, 0.0, 0.0, 128.0, 32.0, True, ["DAT x4"]) == "Settings applied."
    assert {key: state.options.get(key) for key in ("ESRGAN_tile", "ESRGAN_tile_overlap", "SWIN_tile",
                                                    "SWIN_tile_overlap", "DAT_tile", "DAT_tile_overlap",
                                                    "SWIN_torch_compile")} == {
        "ESRGAN_tile": 256, "ESRGAN_tile_overlap": 16, "SWIN_tile": 64, "SWIN_tile_overlap": 4, "DAT_tile": 0,
        "DAT_tile_overlap": 0, "SWIN_torch_compile": True}
    assert state.options.get("dat_enabled_models") == ["DAT x4"]
    assert (tiles("ESRGAN_4x"), tiles("SwinIR 4x"), tiles("DAT x2"), tiles("ScuNET GAN")) == \
        ((256, 16), (64, 4), (0, 0), (128, 32))
    assert state.options.get("SCUNET_tile") == 128 and state.options.get("SCUNET_tile_overlap") == 32
    assert UPSCALERS.get("SwinIR 4x").compile and not UPSCALERS.get("DAT x2").compile
    with pytest.raises(gr.Error, match=r"tile_overlap must be an integer in \[0, 7\] for tile_size 16"):
        apply(256.0, 16.0, 16.0, 8.0, 0.0, 0.0, 128.0, 32.0, False, [])
    assert (tiles("ESRGAN_4x"), tiles("SwinIR 4x")) == ((256, 16), (64, 4))
    assert UPSCALERS.get("SwinIR 4x").compile  # nothing of a refused form is applied
