"""IP-Adapter units in the web UI's ControlNet accordions: an IP-Adapter preprocessor makes the unit an image prompt,
translated into the same `ip_adapter*` params an API request's unit gives (`webui.ui.controlnet_units.with_controlnet`
through `webui.api_ip_adapter.ui_ip_adapter_unit_spec`)."""

from __future__ import annotations

import base64
import io
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter
from pipelines.params import Txt2ImgParams
from webui.ui.controlnet_units import UNIT_FIELDS, with_controlnet


@pytest.fixture(scope="module")
def state(tiny_sd1_dir, tmp_path_factory):
    """A ControlNet folder as the extension's users fill it: a ControlNet, an IP-Adapter and its image encoder."""
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.testing.tiny_controlnet import build_tiny_controlnet
    from webui.controlnet_models import ControlNetModels

    folder = tmp_path_factory.mktemp("ui-ip") / "ControlNet"
    build_tiny_controlnet(folder / "tiny_canny", seed=1)
    save_tiny_ip_adapter(folder, load_diffusion_model(tiny_sd1_dir).unet)
    return SimpleNamespace(controlnets=ControlNetModels(folder))


def reference() -> Image.Image:
    return Image.fromarray((np.random.RandomState(0).rand(40, 40, 3) * 255).astype("uint8"))


def unit(enabled=True, image=None, preprocessor="ip-adapter_clip_sd15", model="ip-adapter_tiny", weight=1.0,
         start=0.0, end=1.0, control_mode="Balanced", mask=None, region=None) -> list:
    values = [enabled, image, preprocessor, model, weight, start, end, "Crop and Resize", control_mode, False, 512.0,
              -1.0, -1.0, mask, region]
    assert len(values) == len(UNIT_FIELDS)
    return values


def test_an_ip_adapter_unit_gives_the_params_an_api_request_unit_gives(state):
    from pipelines.ip_adapter import IPAdapterTxt2ImgParams
    from webui.api_controlnet import parse_ip_adapter_units
    from webui.api_ip_adapter import ip_adapter_fields

    picture = reference()
    ui = with_controlnet(state, "txt2img", Txt2ImgParams(prompt="x"),
                         unit(False, None) + unit(image=picture, weight=0.6, start=0.2, end=0.9))
    assert type(ui) is IPAdapterTxt2ImgParams and ui.prompt == "x"
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    api_unit = {"module": "ip-adapter_clip_sd15", "model": "ip-adapter_tiny [abcd1234]", "weight": 0.6,
                "guidance_start": 0.2, "guidance_end": 0.9, "image": base64.b64encode(buffer.getvalue()).decode()}
    api = ip_adapter_fields(parse_ip_adapter_units([api_unit], models=state.controlnets, max_pixels=10**6,
                                                   max_bytes=10**7))
    assert ui.ip_adapter == api["ip_adapter"]  # the same file and encoder folder
    assert ui.ip_adapter[0].source == str(state.controlnets.folder / "ip-adapter_tiny.safetensors")
    assert ui.ip_adapter_scale == api["ip_adapter_scale"] == [0.6]
    assert ui.ip_adapter_guidance == api["ip_adapter_guidance"] == [(0.2, 0.9)]
    (ui_images,), (api_images,) = ui.ip_adapter_image, api["ip_adapter_image"]
    assert np.array_equal(np.asarray(ui_images[0]), np.asarray(api_images[0]))


def test_an_effective_region_mask_is_the_adapters_mask(state):
    region = Image.new("L", (64, 64), 0)
    region.paste(255, (0, 0, 32, 64))
    params = with_controlnet(state, "txt2img", Txt2ImgParams(prompt="x"),
                             unit(image=reference(), region=region) + unit(image=reference()))
    (first,), second = params.ip_adapter_mask
    assert second is None and np.array_equal(np.asarray(first), np.asarray(region))
    assert params.ip_adapter_call().masks[0][0].mode == "L"


def test_ip_adapter_and_controlnet_units_together_and_img2img_takes_the_init_image(state):
    from pipelines.img2img import Img2ImgParams
    from pipelines.ip_adapter_controlnet import ControlIPAdapterImg2ImgParams, ControlIPAdapterTxt2ImgParams

    picture = reference()
    canny = unit(image=picture, preprocessor="canny", model="tiny_canny", weight=0.5)
    both = with_controlnet(state, "txt2img", Txt2ImgParams(prompt="x"), canny + unit(image=picture))
    assert type(both) is ControlIPAdapterTxt2ImgParams
    assert [spec.model_name for spec in both.controlnets] == ["tiny_canny"] and len(both.ip_adapter) == 1
    init = Image.new("RGB", (64, 64), "red")
    img2img = with_controlnet(state, "img2img", Img2ImgParams(prompt="x", init_images=[init]),
                              canny + unit(preprocessor="ip-adapter-auto"))
    assert type(img2img) is ControlIPAdapterImg2ImgParams
    assert img2img.ip_adapter_image == [[init]]  # the unit's empty image: the init image, as the extension


@pytest.mark.parametrize("values, fragment", [
    (unit(image=None), "ControlNet Unit 0 needs a control image (the reference picture of its IP-Adapter)"),
    (unit(image=reference(), weight=2.5), "ControlNet Unit 0 weight (the IP-Adapter's scale) must be a number"),
    (unit(image=reference(), start=0.8, end=0.2), "ControlNet Unit 0: guidance_start 0.8 is after guidance_end 0.2"),
    (unit(image=reference(), control_mode="My prompt is more important"),
     "ControlNet Unit 0: control_mode 'My prompt is more important' on an IP-Adapter unit is not supported"),
    (unit(image=reference(), mask=Image.new("L", (40, 40))), "ControlNet Unit 0: a mask on an IP-Adapter unit"),
    (unit(image=reference(), model="tiny_canny"), "ControlNet Unit 0: model 'tiny_canny' is a ControlNet folder"),
    (unit(image=reference(), preprocessor="ip-adapter_face_id_plus"), "FaceID / PuLID adapters need insightface"),
    (unit(image=reference()) * 5, "5 units use an IP-Adapter preprocessor; at most 4"),
])
def test_bad_ip_adapter_units_are_refused_naming_the_unit(state, values, fragment):
    with pytest.raises(ValueError) as refused:
        with_controlnet(state, "txt2img", Txt2ImgParams(prompt="x"), values)
    assert fragment in str(refused.value)


class Payload:  # a pickled global torch's weights-only loader refuses
    pass


def test_an_unsafe_weights_file_is_refused(state, tmp_path):
    evil = state.controlnets.folder / "ip-adapter_evil.bin"
    torch.save({"image_proj": {"x": Payload()}, "ip_adapter": {}}, evil)
    try:
        with pytest.raises(ValueError, match="ControlNet Unit 0: IP-Adapter file 'ip-adapter_evil.bin' cannot be "
                                             "used: .*Payload"):
            with_controlnet(state, "txt2img", Txt2ImgParams(prompt="x"), unit(image=reference(), model="ip-adapter_evil"))
    finally:
        evil.unlink()


def test_hires_fix_takes_the_units_into_both_passes(state):
    """Hires. fix on: the params are the hires class carrying the adapters (`pipelines.ip_adapter_hires`), with the
    ControlNet units too when there are some."""
    from pipelines.hires import HiresParams
    from pipelines.ip_adapter_hires import ControlIPAdapterHiresParams, IPAdapterHiresParams

    hires = HiresParams(prompt="x", hr_scale=2.0)
    params = with_controlnet(state, "txt2img", hires, unit(image=reference(), weight=0.7))
    assert type(params) is IPAdapterHiresParams and params.hr_scale == 2.0 and params.ip_adapter_scale == [0.7]
    both = with_controlnet(state, "txt2img", hires, unit(image=reference())
                           + unit(image=reference(), preprocessor="none", model="tiny_canny"))
    assert type(both) is ControlIPAdapterHiresParams and len(both.controlnets) == 1


def test_the_preprocessor_list_offers_the_ip_adapter_modules(state):
    import gradio as gr

    from webui.ui.controlnet_units import build_controlnet_units

    with gr.Blocks():
        widgets = build_controlnet_units(state, "txt2img", 1)
    preprocessor = widgets[UNIT_FIELDS.index("preprocessor")]
    choices = [choice[0] if isinstance(choice, tuple) else choice for choice in preprocessor.choices]
    assert {"ip-adapter_clip_sd15", "ip-adapter_clip_sdxl", "ip-adapter-auto"} <= set(choices)
    assert "canny" in choices


def test_the_preview_button_says_an_ip_adapter_unit_has_no_control_map():
    from webui.ui.controlnet_units import preview_control_map

    with pytest.raises(ValueError, match="ip-adapter_clip_sd15 makes no control map: the unit's image is the "
                                         "IP-Adapter's reference picture"):
        preview_control_map(reference(), "ip-adapter_clip_sd15", False, 512, -1, -1, "Crop and Resize", 64, 64)


def test_an_ip_adapter_preprocessor_hides_the_map_controls_and_says_why(state):
    """The extension ignores resize mode, Pixel Perfect, resolution and thresholds for its IP-Adapter modules (their
    preprocessor returns CLIP embeddings, no map to fit); the unit hides them then, and a note takes their place."""
    import gradio as gr

    from .ui_blocks import handler

    with gr.Blocks() as blocks:
        from webui.ui.controlnet_units import build_controlnet_units

        build_controlnet_units(state, "txt2img", 1)
    fn = handler(blocks, "txt2img_controlnet_0_preprocessor", "change")
    shown = [blocks.blocks[block._id].elem_id for block in fn.outputs]
    prefix = "txt2img_controlnet_0"
    assert shown == [f"{prefix}_{name}" for name in ("resize_mode", "pixel_perfect", "processor_res", "threshold_a",
                                                     "threshold_b", "preview_run", "preview_map", "ip_adapter_note")]
    for preprocessor, image_prompt in (("ip-adapter_clip_sd15", True), ("ip-adapter-auto", True),
                                       ("ip-adapter_face_id_plus", True), ("canny", False), ("none", False)):
        updates = fn.fn(preprocessor)
        assert [update["visible"] for update in updates] == [not image_prompt] * 7 + [image_prompt], preprocessor
