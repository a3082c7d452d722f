"""sd-webui-controlnet unit fields the API reads: pixel_perfect, processor_res (its -1 = 512), hr_option, and
hires fix with units (no longer refused: the units guide both passes).

References: sd-webui-controlnet `scripts/controlnet.py` `bound_check_params` (a negative processor_res takes the
preprocessor slider's default, 512) and its `hr_option` ("Both", "Low res only", "High res only").
"""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from pipelines.params import GenerationLimits
from webui.api_controlnet import parse_units
from webui.api_convert import to_txt2img_params
from webui.api_requests import Txt2ImgRequest


class Catalog:
    """The two calls parse_units makes on the server's ControlNet catalog: a name resolves to itself."""

    def resolve(self, name):
        return str(name)


def image_data() -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), "white").save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def units(**fields):
    return parse_units([{"model": "tiny_canny", "module": "canny", "image": image_data(), **fields}], models=Catalog(),
                       max_units=4, max_pixels=10**6, max_bytes=10**7)


def test_pixel_perfect_and_processor_res_are_read():
    spec = units(pixel_perfect=True, processor_res=64)[0]
    assert (spec.pixel_perfect, spec.processor_res, spec.hr_option) == (True, 64, "Both")
    assert units(processor_res=-1)[0].processor_res == 512  # the extension's default for -1
    assert units()[0].processor_res == 512 and units()[0].pixel_perfect is False


@pytest.mark.parametrize("fields, fragment", [
    ({"processor_res": 5000}, "processor_res must be an integer in [64, 2048]"),
    ({"processor_res": 100.5}, "processor_res must be an integer"),
    ({"pixel_perfect": "yes"}, "pixel_perfect must be true or false"),
    ({"hr_option": "Sometimes"}, "hr_option 'Sometimes' is not one of"),
    ({"guidance_start": 0.8, "guidance_end": 0.2}, "guidance_start 0.8 is after guidance_end 0.2"),  # not a failed job
])
def test_bad_fields_are_refused_naming_them(fields, fragment):
    with pytest.raises(ValueError) as error:
        units(**fields)
    assert fragment in str(error.value)


def hires_request(**unit_fields) -> Txt2ImgRequest:
    unit = {"model": "tiny_canny", "module": "canny", "image": image_data(), **unit_fields}
    return Txt2ImgRequest(prompt="x", steps=2, width=64, height=64, enable_hr=True, hr_scale=2, hr_upscaler="Lanczos",
                          alwayson_scripts={"controlnet": {"args": [unit]}})


def test_hires_fix_with_units_carries_both_recipes():
    from pipelines.controlnet import ControlHiresParams

    params = to_txt2img_params(hires_request(), limits=GenerationLimits(), lora_names=None,
                               controlnet_models=Catalog())
    assert isinstance(params, ControlHiresParams)
    assert (params.hr_scale, params.hr_upscaler, len(params.controlnets)) == (2, "Lanczos", 1)


def test_a_unit_for_one_hires_pass_only_is_refused():
    with pytest.raises(ValueError, match="hr_option='Low res only' is not supported"):
        to_txt2img_params(hires_request(hr_option="Low res only"), limits=GenerationLimits(), lora_names=None,
                          controlnet_models=Catalog())


@pytest.mark.parametrize("value", [-1, -2, -0.5, -300])
def test_any_negative_threshold_is_the_preprocessors_default(value):
    """sd-webui-controlnet's `bound_check_params` resets every negative threshold to its slider's default, as
    /controlnet/detect does here (it used to be a 422 for anything but exactly -1)."""
    spec = units(threshold_a=value, threshold_b=value)[0]
    assert (spec.threshold_a, spec.threshold_b) == (None, None)


def test_thresholds_outside_the_slider_are_taken_where_the_math_is_defined():
    """The extension never range-checks API thresholds: canny 0 / 300 and webuiapi's default tile_resample rate 64
    (threshold_a=64, threshold_b=64) are run as sent."""
    spec = units(threshold_a=0, threshold_b=300)[0]
    assert (spec.threshold_a, spec.threshold_b) == (0, 300)
    spec = units(module="tile_resample", threshold_a=64, threshold_b=64)[0]
    assert (spec.preprocessor, spec.threshold_a) == ("tile_resample", 64)


def test_a_threshold_that_is_not_a_number_is_refused():
    with pytest.raises(ValueError, match="threshold_a must be a number .-1 for the preprocessor's default.*'high'"):
        units(threshold_a="high")


def mask_data(colour, drawn: bool = False) -> str:
    from PIL import ImageDraw

    mask = Image.new("RGB", (64, 64), colour)
    if drawn:
        ImageDraw.Draw(mask).line((0, 0, 63, 63), fill="white", width=3)
    buffer = io.BytesIO()
    mask.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.parametrize("colour", ["black", "white", (3, 3, 3), (252, 252, 252)])
def test_a_blank_unit_mask_is_ignored_as_the_extension_ignores_it(colour):
    """sd-webui-controlnet ignores, for a module other than inpaint, a mask whose first channel is all <= 5 or all
    >= 250 (what its UI and clients send with every unit): the unit runs as without it."""
    from pipelines.controlnet.unit_mask import with_mask_resolved

    for fields in ({"mask": mask_data(colour)}, {"mask_image": mask_data(colour)},
                   {"image": {"image": image_data(), "mask": mask_data(colour)}}):
        (spec,) = units(**fields)
        assert spec.mask.size == (64, 64)
        assert with_mask_resolved(spec) == units()[0]


def test_a_drawn_unit_mask_on_another_module_is_the_picture_as_in_the_extension():
    """The extension's "Canvas scribble mode": a drawn mask replaces the picture (grey) for a module without mask."""
    import numpy as np

    from pipelines.controlnet.unit_mask import with_mask_resolved

    for fields in ({"mask": mask_data("black", drawn=True)}, {"image": {"image": image_data(),
                                                                        "mask": mask_data("black", drawn=True)}}):
        resolved = with_mask_resolved(units(**fields)[0])
        drawn = np.asarray(Image.open(io.BytesIO(base64.b64decode(mask_data("black", drawn=True)))).convert("RGB"))
        assert resolved.mask is None and np.array_equal(np.asarray(resolved.image), drawn)


def test_enabled_units_label_by_list_place_rename_old_keys_and_skip_disabled_ones():
    from webui.api_controlnet import enabled_units

    units = [{"enabled": False, "model": "off"}, {"model": "a", "guidance": 0.5}, {"model": "b", "enabled": True}]
    assert list(enabled_units(units, "unit")) == [("unit 1", {"model": "a", "guidance_end": 0.5}),
                                                  ("unit 2", {"model": "b", "enabled": True})]


@pytest.mark.parametrize("units, words", [
    ([{"model": "a"}, "canny"], "unit 1 must be an object, got str"),
    ([{"model": "a", "weigth": 1}], "unit 0: unknown key 'weigth'"),
])
def test_enabled_units_refuse_a_unit_naming_its_place(units, words):
    from webui.api_controlnet import enabled_units

    with pytest.raises(ValueError, match=words):
        list(enabled_units(units, "unit"))
