"""SD upscale's controls under img2img's Script dropdown (webui/ui/script_sd_upscale.py), driven through the built
Blocks' own handlers on a tiny model."""

from __future__ import annotations

import gradio as gr
import pytest
from PIL import Image

from pipelines.infotext import parse_infotext

from .script_ui import img2img_generate
from .script_ui import img2img_script_choice as script_choice
from .ui_blocks import built_ui, component, handler


@pytest.fixture(scope="module")
def built(tiny_sd1_dir, tmp_path_factory):
    with built_ui(tiny_sd1_dir, tmp_path_factory.mktemp("ui-sd-upscale")) as pair:
        yield pair


def generate(blocks, script_changes, **changes):
    picture = Image.new("RGB", (48, 48), (200, 30, 30))
    return img2img_generate(blocks, "sd-upscale-ui", script_changes, **{
        "prompt": "a red cat", "steps": 1, "seed": 3, "width": 64, "height": 64,
        "image": {"background": picture, "layers": [], "composite": picture}, **changes})


def test_img2img_lists_sd_upscale_and_txt2img_does_not(built):
    _, blocks = built
    assert "SD upscale" in [choice[0] for choice in component(blocks, "img2img_script").choices]
    assert "SD upscale" not in [choice[0] for choice in component(blocks, "txt2img_script").choices]
    radio = component(blocks, "img2img_sd_upscale_upscaler_index")
    assert [choice[0] for choice in radio.choices][:3] == ["None", "Lanczos", "Nearest"] and radio.value == "None"


def test_the_controls_become_a1111s_script_args(built):
    _, blocks = built
    title, args = script_choice(blocks, script="SD upscale", sd_upscale_overlap=32.0,
                                sd_upscale_upscaler_index="Lanczos", sd_upscale_scale_factor=2.0)
    assert title == "SD upscale" and args[1:] == [32, "Lanczos", 2.0] and isinstance(args[1], int)


def test_generate_shows_the_upscaled_picture(built):
    _, blocks = built
    last = generate(blocks, {"script": "SD upscale", "sd_upscale_overlap": 32, "sd_upscale_upscaler_index": "Lanczos",
                             "sd_upscale_scale_factor": 2})
    gallery, infotexts = last[2], last[4]
    assert len(gallery) == 1
    with Image.open(gallery[0][0]) as image:
        assert image.size == (96, 96)
    assert parse_infotext(infotexts[0])["SD upscale upscaler"] == "Lanczos"


def test_an_overlap_as_large_as_the_tile_is_refused(built):
    _, blocks = built
    with pytest.raises(gr.Error, match="Tile overlap 64 must be at least 0 and less than the tile size 64x64"):
        generate(blocks, {"script": "SD upscale", "sd_upscale_overlap": 64, "sd_upscale_upscaler_index": "Lanczos"})


def test_the_refresh_button_offers_the_servers_upscalers_now(built, tmp_path):
    from mixkit.testing.tiny_upscalers import TINY_RRDB, save_upscaler, tiny_upscaler

    state, blocks = built
    refresh = handler(blocks, "img2img_sd_upscale_refresh_upscalers", "click").fn
    folder, before = tmp_path / "ESRGAN", state.config.esrgan_models_path
    folder.mkdir()
    save_upscaler(tiny_upscaler(TINY_RRDB), folder / "Fresh_4x.pth", "esrgan")
    state.config.esrgan_models_path = str(folder)
    try:
        update = refresh("Lanczos")
        assert update["choices"][:3] == ["None", "Lanczos", "Nearest"] and "Fresh_4x" in update["choices"]
        assert update["value"] == "Lanczos"
    finally:  # the file gone and rescanned: its name leaves the process-wide registry
        (folder / "Fresh_4x.pth").unlink()
        state.refresh_upscalers()
        state.config.esrgan_models_path = before
