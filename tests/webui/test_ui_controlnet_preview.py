"""A ControlNet unit's "Preview preprocessor" (the extension's "Run preprocessor"): the map its preprocessor makes of
its image, at the resolution generation uses, refusals shown as errors."""

from __future__ import annotations

import gradio as gr
import pytest
from PIL import Image, ImageDraw

from .ui_blocks import handler

UNIT_DEFAULTS = dict(pixel_perfect=False, processor_res=512.0, threshold_a=-1.0, threshold_b=-1.0,
                     resize_mode="Crop and Resize", width=64, height=64)  # as the widgets start, and a 64x64 tab


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-cn-preview")
    (root / "models").mkdir()
    (root / "controlnets" / "canny_model").mkdir(parents=True)  # listed by name; a preview never loads a model
    (root / "controlnets" / "canny_model" / "config.json").write_text("{}")
    state = ServerState(ServerConfig(models_dir=str(root / "models"), output_dir=str(root / "out"),
                                     controlnet_dir=str(root / "controlnets")))
    try:
        yield build_ui(state)
    finally:
        state.close()


def picture() -> Image.Image:
    image = Image.new("RGB", (100, 60), "black")
    ImageDraw.Draw(image).rectangle((20, 10, 70, 45), outline="white", width=3)
    return image


def preview(blocks, kind: str = "txt2img", image=None, preprocessor: str = "canny", **changes):
    values = {**UNIT_DEFAULTS, **changes}
    return handler(blocks, f"{kind}_controlnet_0_preview_run", "click").fn(
        image, preprocessor, values["pixel_perfect"], values["processor_res"], values["threshold_a"],
        values["threshold_b"], values["resize_mode"], values["width"], values["height"])


@pytest.mark.parametrize("kind", ["txt2img", "img2img"])
def test_the_button_reads_the_units_preprocessor_settings_and_the_tabs_size(blocks, kind):
    click = handler(blocks, f"{kind}_controlnet_0_preview_run", "click")
    prefix = f"{kind}_controlnet_0"
    assert [block.elem_id for block in click.inputs] == [
        f"{prefix}_image", f"{prefix}_preprocessor", f"{prefix}_pixel_perfect", f"{prefix}_processor_res",
        f"{prefix}_threshold_a", f"{prefix}_threshold_b", f"{prefix}_resize_mode", f"{kind}_width", f"{kind}_height"]
    assert [block.elem_id for block in click.outputs] == [f"{prefix}_preview_map"]


def test_the_preview_is_the_map_detect_makes_at_the_units_resolution_and_thresholds(blocks):
    from pipelines.controlnet.detect import detect_control_map

    image = picture()
    shown = preview(blocks, image=image)
    expected = detect_control_map(image, "canny", processor_res=512)
    assert shown.size == expected.size == (853, 512)  # detected with the short side at 512, as the extension does
    assert shown.tobytes() == expected.tobytes()
    strict = preview(blocks, image=image, processor_res=256.0, threshold_a=50.0, threshold_b=150.0)
    assert strict.tobytes() == detect_control_map(image, "canny", processor_res=256, threshold_a=50,
                                                  threshold_b=150).tobytes()
    assert preview(blocks, image=image, preprocessor="none").tobytes() == image.tobytes()


def test_pixel_perfect_previews_at_the_resolution_that_fits_the_tabs_size(blocks):
    from pipelines.controlnet.detect import detect_control_map

    image = picture()
    # 100x60 covering 128x96 ("Crop and Resize"): factor max(96/60, 128/100) = 1.6, short side round(1.6 * 60) = 96
    shown = preview(blocks, image=image, pixel_perfect=True, width=128, height=96)
    assert shown.size == (160, 96)
    assert shown.tobytes() == detect_control_map(image, "canny", processor_res=96).tobytes()
    # "Resize and Fill" fits inside instead: factor min(1.6, 1.28) = 1.28, short side round(76.8) = 77
    fitted = preview(blocks, image=image, pixel_perfect=True, width=128, height=96, resize_mode="Resize and Fill")
    assert fitted.tobytes() == detect_control_map(image, "canny", processor_res=77).tobytes()


def test_a_preview_without_image_or_with_bad_values_says_what_to_do(blocks):
    with pytest.raises(gr.Error, match="Upload a control image to this unit first"):
        preview(blocks)
    with pytest.raises(gr.Error, match="nope"):
        preview(blocks, image=picture(), preprocessor="nope")
    with pytest.raises(gr.Error, match="processor_res"):
        preview(blocks, image=picture(), processor_res=20.0)
