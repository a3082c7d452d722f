"""The upscaler refresh buttons (Extras, txt2img's Hires. fix): files added to an upscaler folder since start become
choices, removed ones stop being choices (the selection falls back to the first), a folder gone missing is an error
and changes nothing."""

from __future__ import annotations

import gradio as gr
import pytest

from mixkit.testing.tiny_upscalers import TINY_RRDB, save_upscaler, tiny_upscaler
from pipelines.upscale import UPSCALERS

from .ui_blocks import handler


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
        yield tmp_path / "ESRGAN", build_ui(state)
    finally:
        state.close()


def test_the_refresh_button_offers_what_the_folders_hold_now(built):
    folder, blocks = built
    refresh = handler(blocks, "extras_refresh_upscalers", "click").fn
    save_upscaler(tiny_upscaler(TINY_RRDB, seed=1), folder / "4x-UltraSharp.pth", "esrgan")
    update = refresh("ESRGAN_4x")
    # a new file comes after those already there (entries are replaced in place, never briefly missing)
    assert update["choices"] == ["Lanczos", "Nearest", "Bicubic", "ESRGAN_4x", "4x-UltraSharp"]
    assert update["value"] == "ESRGAN_4x"  # the selection is kept while its file is there
    (folder / "ESRGAN_4x.pth").unlink()
    update = refresh("ESRGAN_4x")
    assert update["choices"] == ["Lanczos", "Nearest", "Bicubic", "4x-UltraSharp"] and update["value"] == "Lanczos"
    assert "ESRGAN_4x" not in UPSCALERS


def test_a_folder_gone_missing_is_an_error_and_changes_nothing(built):
    folder, blocks = built
    refresh = handler(blocks, "extras_refresh_upscalers", "click").fn
    (folder / "ESRGAN_4x.pth").unlink(), folder.rmdir()
    with pytest.raises(gr.Error, match="Upscaler models folder '<esrgan_models_path>' does not exist; create it or fix "
                                       "the path"):  # the page does not learn the server's folders
        refresh("ESRGAN_4x")
    assert "ESRGAN_4x" in UPSCALERS


def test_the_hires_fix_refresh_button_offers_the_new_files_after_the_latent_modes(built):
    folder, blocks = built
    refresh = handler(blocks, "txt2img_hr_refresh_upscalers", "click").fn
    save_upscaler(tiny_upscaler(TINY_RRDB, seed=1), folder / "4x-UltraSharp.pth", "esrgan")
    update = refresh("Latent")
    assert update["value"] == "Latent" and update["choices"][0] == "Latent"
    assert update["choices"][-3:] == ["Bicubic", "ESRGAN_4x", "4x-UltraSharp"] and "None" in update["choices"]
