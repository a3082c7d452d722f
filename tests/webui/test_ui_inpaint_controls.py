"""The img2img tab's inpaint and outpaint controls become the same Img2ImgParams the API builds."""

from __future__ import annotations

import inspect

import pytest
from PIL import Image

from pipelines.params import Txt2ImgParams
from webui.ui.generate_tab import IMG2IMG_FIELDS, MASK_MODES, img2img_params

from .ui_blocks import component

# the Soft inpainting accordion at A1111's defaults, off (webui/ui/soft_inpainting_controls.py)
SOFT_OFF = {"soft_inpainting": False, "si_mask_blend_power": 1, "si_mask_blend_scale": 0.5,
            "si_inpaint_detail_preservation": 4, "si_composite_mask_influence": 0,
            "si_composite_difference_threshold": 0.5, "si_composite_difference_contrast": 2}
BASE = Txt2ImgParams(prompt="a cube", steps=1, width=64, height=64, seed=5, sampler="Euler")


def stroke_layer(box=(0, 0, 16, 16), alpha=255) -> Image.Image:
    layer = Image.new("RGBA", (64, 64), (0, 0, 0, 0))
    layer.paste((255, 255, 255, alpha), box)
    return layer


def fields(**changes) -> dict:
    """The tab's values at their UI defaults (`build_generate_tab`), with `changes`."""
    image = Image.new("RGB", (64, 64), (10, 20, 30))
    values = {"editor": {"background": image, "layers": [], "composite": image}, "mode": "img2img",
              "resize_mode": "just resize", "denoising_strength": 0.75, "mask_blur": 4, "inpainting_fill": "original",
              "only_masked": False, "only_masked_padding": 32, "mask_mode": MASK_MODES[0], "mask_upload": None,
              "outpaint_pixels": 128, "outpaint_fill": "fill", "outpaint_sides": ["left", "right", "up", "down"],
              "outpaint_method": "Poor man's outpainting", "outpaint_falloff": 1.0, "outpaint_color_variation": 0.05,
              **SOFT_OFF, "image_cfg_scale": 1.5}
    values.update(changes)
    assert set(values) == set(IMG2IMG_FIELDS)
    return values


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-inpaint")
    (root / "models").mkdir()
    state = ServerState(ServerConfig(models_dir=str(root / "models"), output_dir=str(root / "out")))
    yield build_ui(state)
    state.close()


def test_the_controls_start_at_a1111s_defaults(blocks):
    # A1111 img2img: Mask mode "Inpaint masked", 'Only masked padding, pixels' 32 (0..256, step 4); Poor man's
    # outpainting: pixels 128, its own masked content "fill".
    assert component(blocks, "img2img_mask_mode").value == "Inpaint masked"
    padding = component(blocks, "img2img_inpaint_full_res_padding")
    assert (padding.value, padding.minimum, padding.maximum, padding.step) == (32, 0, 256, 4)
    assert component(blocks, "img2img_outpaint_fill").value == "fill"
    assert component(blocks, "img2img_outpaint_pixels").value == 128
    # Outpainting mk2: its Fall-off exponent (0..4, 1) and Color variation (0..1, 0.05); Poor man's is the default
    assert component(blocks, "img2img_outpaint_method").value == "Poor man's outpainting"
    falloff, variation = component(blocks, "img2img_outpaint_falloff"), component(blocks,
                                                                                   "img2img_outpaint_color_variation")
    assert (falloff.value, falloff.minimum, falloff.maximum, falloff.step) == (1.0, 0, 4, 0.01)
    assert (variation.value, variation.minimum, variation.maximum, variation.step) == (0.05, 0, 1, 0.01)
    assert component(blocks, "img2img_inpainting_fill").value == "original"


def test_outpaint_takes_its_own_masked_content_as_outpaint_does():
    from pipelines.outpaint import outpaint

    default_fill = inspect.signature(outpaint).parameters["inpainting_fill"].default
    params = img2img_params(BASE, fields(mode="outpaint"))
    assert params.inpainting_fill == default_fill == "fill" and params.mask is None
    assert img2img_params(BASE, fields(mode="outpaint", outpaint_fill="latent noise")).inpainting_fill == "latent noise"
    assert img2img_params(BASE, fields(mode="inpaint", editor={
        "background": Image.new("RGB", (64, 64)), "layers": [stroke_layer()], "composite": None})).inpainting_fill == \
        "original"


def test_inpaint_not_masked_and_padding_reach_the_params():
    editor = {"background": Image.new("RGB", (64, 64)), "layers": [stroke_layer()], "composite": None}
    params = img2img_params(BASE, fields(mode="inpaint", editor=editor, mask_mode="Inpaint not masked",
                                         only_masked=True, only_masked_padding=48))
    assert params.inpainting_mask_invert is True and params.inpaint_full_res is True
    assert params.inpaint_full_res_padding == 48 and isinstance(params.inpaint_full_res_padding, int)
    assert params.mask.getpixel((8, 8)) == 255 and params.mask.getpixel((40, 40)) == 0
    assert img2img_params(BASE, fields(mode="inpaint", editor=editor)).inpainting_mask_invert is False
    # The mode only means something with a mask: img2img and outpaint never invert.
    assert img2img_params(BASE, fields(mask_mode="Inpaint not masked")).inpainting_mask_invert is False
    with pytest.raises(ValueError, match="Mask mode must be one of Inpaint masked, Inpaint not masked; got 'invert'"):
        img2img_params(BASE, fields(mask_mode="invert"))


def test_an_uploaded_mask_is_used_as_the_api_uses_it():
    uploaded = Image.new("L", (64, 64), 0)
    uploaded.paste(255, (32, 32, 64, 64))
    params = img2img_params(BASE, fields(mode="inpaint", mask_upload=uploaded))
    assert params.mask is uploaded  # read by the pipeline (alpha > 128, or grey levels), exactly as the API's mask
    painted = {"background": Image.new("RGB", (64, 64)), "layers": [stroke_layer()], "composite": None}
    with pytest.raises(ValueError, match="both painted strokes and an uploaded mask"):
        img2img_params(BASE, fields(mode="inpaint", editor=painted, mask_upload=uploaded))
    faint = {"background": Image.new("RGB", (64, 64)), "layers": [stroke_layer(alpha=60)], "composite": None}
    assert img2img_params(BASE, fields(mode="inpaint", editor=faint, mask_upload=uploaded)).mask is uploaded
    with pytest.raises(ValueError, match="paint over the area to repaint, or upload a mask"):
        img2img_params(BASE, fields(mode="inpaint"))


def test_inpaint_from_the_ui_equals_the_api_for_a_faint_stroke(tiny_sd1_dir, tmp_path):
    """The hunt's repro: an opaque square plus a faint band (alpha 60); the UI's mask and the API's (the same RGBA
    layer sent as `mask`) must repaint the same pixels."""
    from dataclasses import replace

    from webui.config import ServerConfig
    from webui.server_state import ServerState

    image = Image.new("RGB", (64, 64), (120, 60, 200))
    layer = stroke_layer((16, 16, 40, 40))
    layer.paste((255, 255, 255, 60), (0, 48, 64, 56))
    editor = {"background": image, "layers": [layer], "composite": None}
    state = ServerState(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path / "out"), ui=False))
    try:
        state.load_initial_model()
        ui = img2img_params(BASE, fields(mode="inpaint", editor=editor, mask_blur=0, inpainting_fill="fill",
                                         denoising_strength=0.9))
        api = replace(ui, mask=layer)
        images = [state.submit_generation("img2img", p, save=False).future.result(120).result.images[0] for p in (ui, api)]
    finally:
        state.close()
    assert images[0].tobytes() == images[1].tobytes()
    assert images[0].crop((0, 48, 64, 56)).tobytes() == image.crop((0, 48, 64, 56)).tobytes()  # the band is kept


@pytest.fixture(scope="module")
def served_ui(tmp_path_factory):
    from .ui_blocks import model_less_ui

    with model_less_ui(tmp_path_factory.mktemp("ui-inpaint-mask")) as built:
        yield built


def press_generate(blocks, **changes):
    """The img2img Generate handler's first update, every input as a fresh page sends it (`build_generate_tab`'s
    defaults) with `changes` by elem_id without "img2img_"; no task id (a Gradio client's call): the server makes
    one. Built from the handler's inputs, so an input added to the form does not shift the others."""
    from types import SimpleNamespace

    from .ui_blocks import handler

    run = handler(blocks, "img2img_generate", "click")
    changes = {"prompt": "a cube", "steps": 2, "task_id": "", **changes}
    values = [changes.pop(block.elem_id.removeprefix("img2img_"), block.value) for block in run.inputs]
    assert not changes, f"no such inputs: {changes}"
    return next(run.fn(SimpleNamespace(session_hash="img2img-test"), *values))


def generate_inpaint(blocks, mask):
    """The first update for an inpaint of a 96x64 picture with the uploaded `mask`."""
    picture = Image.new("RGB", (96, 64), (10, 20, 30))
    return press_generate(blocks, image={"background": picture, "layers": [], "composite": picture}, mode="inpaint",
                          mask_upload=mask, width=96, height=64)


def test_a_mask_of_another_aspect_ratio_is_refused_before_queueing(served_ui):
    # README: a refused form value is one "UI refused:" line before anything is queued. The rule is the Python
    # API's (`pipelines.inpaint_mask.prepare_mask`): a mask whose aspect ratio differs cannot be aligned.
    import gradio as gr

    state, blocks = served_ui
    with pytest.raises(gr.Error, match=r"The mask is 50x50 but the image is 96x64: their aspect ratios differ, so the "
                                       r"mask cannot be aligned; give a mask of the image's size\.") as refused:
        generate_inpaint(blocks, Image.new("L", (50, 50), 255))
    assert refused.value.print_exception is False and state.worker.queued == 0


def test_a_scaled_mask_passes_the_check_with_the_pipelines_warning():
    # Same aspect ratio (48x32 for 96x64): the pipeline resizes it and warns; the UI shows that warning up front.
    from webui.ui.generate_tab import check_mask_fits

    assert check_mask_fits(Image.new("L", (48, 32), 255), (96, 64)) == ["Mask resized from 48x32 to the image's 96x64."]
    assert check_mask_fits(Image.new("L", (96, 64), 255), (96, 64)) == []
    picture = Image.new("RGB", (96, 64))
    with pytest.warns(UserWarning, match="Mask resized from 48x32 to the image's 96x64."):
        params = img2img_params(BASE, fields(editor={"background": picture, "layers": [], "composite": picture},
                                             mode="inpaint", mask_upload=Image.new("L", (48, 32), 255)))
    assert params.mask.size == (48, 32)  # the pipeline resizes it, as the Python API does


def test_the_resize_modes_are_a1111s_four(blocks):
    # A1111's img2img "Resize mode": Just resize, Crop and resize, Resize and fill, Just resize (latent upscale).
    resize = component(blocks, "img2img_resize_mode")
    assert [value for _, value in resize.choices] == ["just resize", "crop and resize", "resize and fill",
                                                      "just resize (latent upscale)"]
    params = img2img_params(BASE, fields(resize_mode="just resize (latent upscale)"))
    assert params.resize_mode == "just resize (latent upscale)"


def test_outpaint_mode_submits_the_sides_rounded_as_the_api_rounds_them(served_ui, monkeypatch):
    # A 60x60 picture by 16 pixels left, right and down: 92x76 is no multiple of 8, so, as the CLI and the API's Poor
    # man's outpainting script (`pipelines.outpaint.outpaint_sides`), each extended axis grows to the next multiple:
    # width 96 (the 36 pixels shared 18/18), height 80 (all 20 at the bottom).
    import gradio as gr

    state, blocks = served_ui
    submitted = []

    def submit_outpaint(params, sides, **_):
        submitted.append(sides)
        raise ValueError("recorded")  # refused: nothing is queued

    monkeypatch.setattr(state, "submit_outpaint", submit_outpaint)
    picture = Image.new("RGB", (60, 60), (10, 20, 30))
    with pytest.raises(gr.Error, match="recorded"):
        press_generate(blocks, image={"background": picture, "layers": [], "composite": picture}, mode="outpaint",
                       outpaint_pixels=16, outpaint_sides=["left", "right", "down"])
    assert submitted == [{"left": 18, "right": 18, "top": 0, "bottom": 20}]


def test_outpaint_mk2_submits_its_sides_and_fill_settings_from_original(served_ui, monkeypatch):
    # Outpainting mk2: the sides rounded as Poor man's, its fill settings, and masked content "original" whatever
    # the Poor man's dropdown says (A1111's mk2 sets inpainting_fill 1).
    import gradio as gr

    state, blocks = served_ui
    submitted = []

    def submit_outpaint(params, sides, mk2=None, **_):
        submitted.append((sides, mk2, params.inpainting_fill, params.mask_blur))
        raise ValueError("recorded")  # refused: nothing is queued

    monkeypatch.setattr(state, "submit_outpaint", submit_outpaint)
    picture = Image.new("RGB", (60, 60), (10, 20, 30))
    with pytest.raises(gr.Error, match="recorded"):
        press_generate(blocks, image={"background": picture, "layers": [], "composite": picture}, mode="outpaint",
                       outpaint_pixels=16, outpaint_sides=["left", "right", "down"], outpaint_method="Outpainting mk2",
                       outpaint_falloff=0.5, outpaint_color_variation=0.25, mask_blur=6)
    assert submitted == [({"left": 18, "right": 18, "top": 0, "bottom": 20},
                          {"falloff_exponent": 0.5, "color_variation": 0.25}, "original", 6)]


def test_outpaint_mk2_settings_out_of_bounds_are_refused_before_queueing(served_ui):
    import gradio as gr

    state, blocks = served_ui
    picture = Image.new("RGB", (64, 64), (10, 20, 30))
    with pytest.raises(gr.Error, match=r"mask_blur must be an integer in \[0, 32\] for Outpainting mk2"):
        press_generate(blocks, image={"background": picture, "layers": [], "composite": picture}, mode="outpaint",
                       outpaint_method="Outpainting mk2", mask_blur=40)
    assert state.worker.queued == 0
