"""ControlNet units over the API, as sd-webui-controlnet clients send them (webuiapi's ControlNetUnit)."""

from __future__ import annotations

import pytest
from PIL import Image, ImageDraw

webuiapi = pytest.importorskip("webuiapi", reason="test dependency webuiapi is not installed (pip install webuiapi)")


# The web UI unit's extension controls as its widgets start: resize mode, control mode, pixel perfect, preprocessor
# resolution, thresholds (-1: the preprocessor's defaults).
UI_UNIT_DEFAULTS = ("Crop and Resize", "Balanced", False, 512.0, -1.0, -1.0, None, None)  # ..., mask, region


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from mixkit.testing.tiny_controlnet import build_tiny_controlnet
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("controlnet")
    build_tiny_controlnet(root / "controlnets" / "tiny_canny", seed=1)
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False,
                              controlnet_dir=str(root / "controlnets"))) as running:
        yield running


@pytest.fixture()
def api(server):
    return webuiapi.WebUIApi(host="127.0.0.1", port=server.port, sampler="Euler", steps=1)


def control_image() -> Image.Image:
    image = Image.new("RGB", (64, 64), "black")
    ImageDraw.Draw(image).rectangle((16, 16, 48, 48), outline="white", width=3)
    return image


def test_model_and_module_lists(api):
    from pipelines.preprocessors import PREPROCESSORS

    assert api.custom_get("controlnet/model_list") == {"model_list": ["tiny_canny"]}
    from webui.api_ip_adapter import IP_ADAPTER_MODULES

    assert api.custom_get("controlnet/module_list")["module_list"] == [*PREPROCESSORS.names(), *IP_ADAPTER_MODULES]


# webuiapi 0.9.17 writes ControlNet units into its mutable default `alwayson_scripts={}`, so units
# would leak into every later call of the process; each call here passes a fresh dict.


def test_txt2img_with_a_controlnet_unit_changes_the_image_and_records_it(api):
    plain = api.txt2img(prompt="a box", seed=11, width=64, height=64)
    unit = webuiapi.ControlNetUnit(image=control_image(), module="canny", model="tiny_canny [0123abcd]", weight=1.5,
                                   resize_mode="Just Resize", threshold_a=100, threshold_b=200)
    controlled = api.txt2img(prompt="a box", seed=11, width=64, height=64, controlnet_units=[unit], alwayson_scripts={})
    assert controlled.image.size == (64, 64)
    assert controlled.image.tobytes() != plain.image.tobytes()
    infotext = controlled.info["infotexts"][0]
    assert "ControlNet 0:" in infotext and "tiny_canny" in infotext and "canny" in infotext
    disabled = webuiapi.ControlNetUnit(image=control_image(), model="tiny_canny", enabled=False)
    again = api.txt2img(prompt="a box", seed=11, width=64, height=64, controlnet_units=[disabled], alwayson_scripts={})
    assert again.image.tobytes() == plain.image.tobytes()


def test_img2img_unit_without_image_uses_the_init_image(api):
    unit = webuiapi.ControlNetUnit(image=None, module="none", model="tiny_canny")
    result = api.img2img(images=[control_image()], prompt="x", seed=2, width=64, height=64, controlnet_units=[unit], alwayson_scripts={})
    assert "ControlNet 0:" in result.info["infotexts"][0]


def test_pixel_perfect_and_processor_res_are_honoured_and_recorded(api):
    """The hunt's case: a pixel-perfect canny unit was run at 512 and recorded as "Pixel Perfect: False".
    sd-webui-controlnet runs canny at the unit's resolution (pixel perfect: computed from the picture and the
    target size, 64 here) and writes the unit's fields into the infotext."""
    def run(**fields):
        unit = webuiapi.ControlNetUnit(image=control_image().resize((128, 128)), module="canny", model="tiny_canny",
                                       resize_mode="Crop and Resize", threshold_a=100, threshold_b=200, **fields)
        result = api.txt2img(prompt="a box", seed=11, width=64, height=64, controlnet_units=[unit], alwayson_scripts={})
        return result.image.tobytes(), result.info["infotexts"][0].split("ControlNet 0: ")[1]

    perfect, perfect_text = run(pixel_perfect=True, processor_res=512)
    at_512, text_512 = run(pixel_perfect=False, processor_res=512)
    at_64, text_64 = run(pixel_perfect=False, processor_res=64)
    assert "Pixel Perfect: True" in perfect_text and "Processor Res" not in perfect_text
    assert "Processor Res: 512" in text_512 and "Pixel Perfect: False" in text_512
    assert perfect == at_64 != at_512  # pixel perfect = 64 here: max(64/128, 64/128) * 128


@pytest.mark.parametrize("changes, fragment", [
    ({"model": "../../etc/passwd"}, "Unknown ControlNet model"),
    ({"model": "/etc/passwd"}, "Unknown ControlNet model"),
    ({"module": "rm -rf"}, "unknown module"),
    ({"weight": -0.5}, "weight must be a finite number >= 0"),
    ({"guidance_start": 0.9, "guidance_end": 0.1}, "guidance_start"),
    ({"control_mode": 3}, "control_mode 3 is not one of"),
    ({"weigth": 0.5}, "unknown key 'weigth'"),
    ({"resize_mode": "Stretch"}, "resize_mode"),
    ({"image": "not-an-image"}, "not valid base64"),
    ({"processor_res": 9999}, "processor_res must be an integer in [64, 2048]"),
    ({"pixel_perfect": "on"}, "pixel_perfect must be true or false"),
    ({"module": "blur_gaussian", "threshold_a": 100}, "threshold_a ('Sigma', slider 0.01-64.0"),
])
def test_bad_units_are_422(api, changes, fragment):
    import requests

    unit = {**webuiapi.ControlNetUnit(image=control_image(), model="tiny_canny").to_dict(), **changes}
    payload = {"prompt": "x", "steps": 1, "width": 64, "height": 64, "alwayson_scripts": {"controlnet": {"args": [unit]}}}
    response = requests.post(f"{api.baseurl}/txt2img", json=payload, timeout=120)
    assert response.status_code == 422, response.text
    assert fragment in response.text


def test_units_need_a_controlnet_folder():
    from webui.api_controlnet import parse_units

    with pytest.raises(ValueError, match="--controlnet-dir"):
        parse_units([{"model": "x"}], models=None, max_units=4, max_pixels=10**6, max_bytes=10**6)
    assert parse_units([{"model": "x", "enabled": False}], models=None, max_units=4, max_pixels=10**6, max_bytes=10**6) == []


def test_ui_units_reach_the_pipeline_as_a_list(server):
    from pipelines.params import Txt2ImgParams
    from webui.ui.controlnet_units import with_controlnet

    state = server.state
    params = Txt2ImgParams(prompt="a box", steps=1, width=64, height=64, seed=11, sampler="Euler")
    first = [True, control_image(), "canny", "tiny_canny", 1.0, 0.0, 1.0, *UI_UNIT_DEFAULTS]
    off = [False, None, "none", None, 1.0, 0.0, 1.0, *UI_UNIT_DEFAULTS]
    second = [True, control_image().rotate(90), "none", "tiny_canny", 0.5, 0.0, 0.5, *UI_UNIT_DEFAULTS]
    both = with_controlnet(state, "txt2img", params, first + off + second)
    state.check_params("txt2img", both)
    outcome = state.submit_generation("txt2img", both, save=False).future.result(120)
    infotext = outcome.result.infotexts[0]
    assert "ControlNet 0: " in infotext and "ControlNet 1: " in infotext and "ControlNet 2" not in infotext
    assert "Weight: 0.5" in infotext.split("ControlNet 1: ")[1]
    one = state.submit_generation("txt2img", with_controlnet(state, "txt2img", params, first + off + off),
                                  save=False).future.result(120)
    assert one.result.images[0].tobytes() != outcome.result.images[0].tobytes()  # the second unit counted


def test_hires_fix_with_a_unit_runs_both_passes_over_the_api(api):
    # sd-webui-controlnet applies its units to the hires pass too; A1111 users combine them all the time.
    unit = webuiapi.ControlNetUnit(image=control_image(), module="canny", model="tiny_canny", weight=1.5,
                                   threshold_a=100, threshold_b=200)
    hires = dict(prompt="a box", seed=11, width=64, height=64, enable_hr=True, hr_scale=2, hr_upscaler="Lanczos",
                 hr_second_pass_steps=1, denoising_strength=0.5)
    controlled = api.txt2img(**hires, controlnet_units=[unit], alwayson_scripts={})
    plain = api.txt2img(**hires)
    assert controlled.image.size == (128, 128) and controlled.image.tobytes() != plain.image.tobytes()
    infotext = controlled.info["infotexts"][0]
    assert "ControlNet 0:" in infotext and "Hires upscale: 2" in infotext


def test_ui_hires_fix_with_a_unit_reaches_the_controlnet_hires_pipeline(server):
    from pipelines.controlnet import ControlHiresParams
    from pipelines.hires import HiresParams
    from webui.ui.controlnet_units import with_controlnet

    state = server.state
    params = HiresParams(prompt="a box", steps=1, width=64, height=64, seed=11, sampler="Euler", hr_scale=2,
                         hr_upscaler="Lanczos", hr_second_pass_steps=1, denoising_strength=0.5)
    unit = [True, control_image(), "canny", "tiny_canny", 1.0, 0.0, 1.0, *UI_UNIT_DEFAULTS]
    controlled = with_controlnet(state, "txt2img", params, unit)
    assert isinstance(controlled, ControlHiresParams)
    state.check_params("txt2img", controlled)
    outcome = state.submit_generation("txt2img", controlled, save=False).future.result(120)
    assert outcome.result.images[0].size == (128, 128) and "ControlNet 0: " in outcome.result.infotexts[0]


def test_extension_routes_version_settings_and_module_details(api):
    from pipelines.controlnet import ControlNetLimits

    assert api.controlnet_version() == 2
    assert api.custom_get("controlnet/settings") == {"control_net_unit_count": ControlNetLimits().max_units}
    details = api.custom_get("controlnet/module_list")["module_detail"]
    # sd-webui-controlnet's `get_modules_detail`: `model_free` only for modules that run without a ControlNet model
    # (reference_*, revision_*), sliders positional (resolution, threshold_a, threshold_b) with its labels from
    # `preprocessor_sliders_config`, None in the resolution slot of a module without one.
    resolution = {"name": "Preprocessor Resolution", "value": 512, "min": 64, "max": 2048}
    assert details["canny"] == {"model_free": False, "sliders": [
        resolution, {"name": "Canny Low Threshold", "value": 100, "min": 1, "max": 255},
        {"name": "Canny High Threshold", "value": 200, "min": 1, "max": 255}]}
    assert details["tile_resample"] == {"model_free": False, "sliders": [
        None, {"name": "Down Sampling Rate", "value": 1.0, "min": 1.0, "max": 8.0, "step": 0.01}]}
    assert details["threshold"]["sliders"] == [resolution,
                                               {"name": "Binarization Threshold", "value": 127, "min": 0, "max": 255}]
    assert details["blur_gaussian"]["sliders"] == [resolution,
                                                   {"name": "Sigma", "value": 9.0, "min": 0.01, "max": 64.0}]
    assert details["depth_midas"] == {"model_free": False, "sliders": [resolution]}
    for name in ("none", "invert", "monochrome"):
        assert details[name] == {"model_free": False, "sliders": []}


def test_module_list_alias_view_shows_the_extensions_ui_names(server):
    import requests

    answer = requests.get(f"http://127.0.0.1:{server.port}/controlnet/module_list?alias_names=true", timeout=30).json()
    assert "invert (from white bg & black line)" in answer["module_list"] and "invert" not in answer["module_list"]
    assert answer["module_detail"]["invert (from white bg & black line)"] == {"model_free": False, "sliders": []}
    assert "canny" in answer["module_list"] and "depth_midas" in answer["module_list"]


def test_control_types_filter_models_by_kind(api):
    types = api.custom_get("controlnet/control_types")["control_types"]
    assert types["All"]["model_list"] == ["None", "tiny_canny"] and types["All"]["default_option"] == "none"
    assert types["Canny"] == {"module_list": ["none", "canny", "invert"], "model_list": ["None", "tiny_canny"],
                              "default_option": "canny", "default_model": "tiny_canny"}
    assert types["Depth"]["model_list"] == ["None"] and types["Depth"]["default_model"] == "None"


def test_detect_returns_the_map_a_unit_would_detect(api):
    """The extension's "Run preprocessor": canny detected at processor_res (the short side), returned as a PNG
    (webuiapi's result decodes it);
    the same map pipelines.controlnet.detect_control_map makes, and the same thresholds the units take."""
    from pipelines.controlnet.detect import detect_control_map

    picture = Image.new("RGB", (64, 64), "black")
    ImageDraw.Draw(picture).rectangle((16, 16, 48, 48), fill=(40, 40, 40))  # a faint square: default thresholds miss it
    answer = api.custom_post("controlnet/detect", payload={
        "controlnet_module": "canny", "controlnet_input_images": [webuiapi.raw_b64_img(picture)],
        "controlnet_processor_res": 128, "controlnet_threshold_a": 5, "controlnet_threshold_b": 10})
    assert answer.info == "Success" and len(answer.images) == 1
    got = answer.images[0]
    expected = detect_control_map(picture, "canny", processor_res=128, threshold_a=5, threshold_b=10)
    assert got.size == (128, 128) and got.convert("RGB").tobytes() == expected.tobytes()
    assert expected.getbbox() is not None and detect_control_map(picture, "canny", processor_res=128).getbbox() is None


def test_detect_with_webuiapi_client_and_defaults(api):
    """webuiapi's controlnet_detect sends `controlnet_images` (the extension ignores that key); -1 sliders mean the
    preprocessor's defaults and a module without a resolution returns the picture's own size."""
    answer = api.controlnet_detect([control_image().resize((96, 64))], module="invert", processor_res=-1,
                                   threshold_a=-1, threshold_b=-1)
    assert answer.info == "Success" and len(answer.images) == 1
    assert answer.images[0].size == (96, 64)


def test_webuiapi_defaults_run_tile_resample_as_the_extension_does(api):
    """webuiapi sends threshold_a=64 / threshold_b=64 unless told otherwise; the extension takes 64 as tile_resample's
    down-sampling rate (its 1-8 is only the UI slider's range), in a unit and in /controlnet/detect alike."""
    from pipelines.preprocessors import run_preprocessor

    answer = api.controlnet_detect([control_image()], module="tile_resample")
    expected = run_preprocessor("tile_resample", control_image(), threshold_a=64)
    assert answer.images[0].convert("RGB").tobytes() == expected.tobytes()
    unit = webuiapi.ControlNetUnit(image=control_image(), module="tile_resample", model="tiny_canny")
    result = api.txt2img(prompt="x", width=64, height=64, seed=1, controlnet_units=[unit], alwayson_scripts={})
    assert "Module: tile_resample" in result.info["infotexts"][0] and "Threshold A: 64" in result.info["infotexts"][0]


def test_detect_takes_any_negative_threshold_as_the_default_as_units_do(api):
    picture = [webuiapi.raw_b64_img(control_image())]
    maps = [api.custom_post("controlnet/detect", payload={
        "controlnet_module": "canny", "controlnet_input_images": picture, "controlnet_threshold_a": a,
        "controlnet_threshold_b": b}).images[0].tobytes() for a, b in ((-1, -1), (-2, -7.5), (100, 200))]
    assert maps[0] == maps[1] == maps[2]


@pytest.mark.parametrize("payload, words", [
    ({"controlnet_module": "openpose", "controlnet_input_images": ["x"]}, ["Module not available", "canny"]),
    ({"controlnet_module": "canny"}, ["No image selected"]),
    ({"controlnet_module": "canny", "controlnet_input_images": ["@@"]}, ["controlnet_input_images[0]"]),
    ({"controlnet_module": "canny", "controlnet_processor_res": 32, "controlnet_input_images": "IMAGE"},
     ["processor_res", "[64, 2048]"]),
    ({"controlnet_module": "blur_gaussian", "controlnet_threshold_a": 300, "controlnet_input_images": "IMAGE"},
     ["threshold_a", "'Sigma'", "[0.01, 64.0]"]),
    ({"controlnet_module": "canny", "controlnet_masks": ["x"], "controlnet_input_images": "IMAGE"}, ["mask"]),
    ({"controlnet_module": "inpaint_only+lama", "controlnet_input_images": "IMAGE"}, ["Module not available", "LaMa"]),
    ({"controlnet_module": "inpaint_global_harmonious", "controlnet_masks": ["x"], "controlnet_input_images": "IMAGE"},
     ["'inpaint'", "the unit's 'mask'"]),
])
def test_detect_refuses_bad_requests_naming_the_field(server, payload, words):
    import requests

    if payload.get("controlnet_input_images") == "IMAGE":
        payload = {**payload, "controlnet_input_images": [webuiapi.raw_b64_img(control_image())]}
    response = requests.post(f"http://127.0.0.1:{server.port}/controlnet/detect", json=payload, timeout=60)
    assert response.status_code == 422, response.text
    assert all(word in response.json()["detail"] for word in words), response.json()


def test_an_extreme_aspect_picture_is_a_422_not_minutes_of_scaling(server):
    """A 1 x 60,000 PNG is far under the input pixel cap, but detecting it scales its short side up to the resolution."""
    import requests

    strip = webuiapi.raw_b64_img(Image.new("RGB", (1, 60_000), "white"))
    url = f"http://127.0.0.1:{server.port}"
    detect = requests.post(f"{url}/controlnet/detect", json={"controlnet_module": "canny", "controlnet_processor_res": 64,
                                                              "controlnet_input_images": [strip]}, timeout=60)
    assert detect.status_code == 422, detect.text
    assert "64x3840000" in detect.json()["detail"]
    unit = {"image": strip, "module": "canny", "model": "tiny_canny", "processor_res": 64}
    generate = requests.post(f"{url}/sdapi/v1/txt2img", timeout=60, json={
        "prompt": "x", "steps": 1, "width": 64, "height": 64, "alwayson_scripts": {"controlnet": {"args": [unit]}}})
    assert generate.status_code == 422, generate.text
    assert "64x3840000" in generate.json()["detail"]


def inpaint_mask() -> Image.Image:
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (20, 16, 44, 40))
    return mask


def inpaint_request(**unit) -> dict:
    unit = {"model": "tiny_canny", "image": webuiapi.raw_b64_img(control_image()), **unit}
    return {"prompt": "x", "seed": 4, "steps": 2, "width": 64, "height": 64, "sampler_name": "Euler",
            "alwayson_scripts": {"controlnet": {"args": [unit]}}}


def test_inpaint_units_round_trip_with_their_mask(api):
    """The extension's inpaint modules over HTTP: the mask as `mask`, `mask_image` or `image.mask`; inpaint_only keeps
    the picture's unmasked pixels (more than 6 px from the mask: its 7 px dilation and box blur)."""
    import base64
    import io

    import numpy as np
    import requests

    mask = webuiapi.raw_b64_img(inpaint_mask())
    answers = [requests.post(f"{api.baseurl}/txt2img", json=inpaint_request(**unit), timeout=120) for unit in (
        {"module": "inpaint_only", "mask": mask}, {"module": "inpaint_only", "mask_image": mask},
        {"module": "inpaint_only", "image": {"image": webuiapi.raw_b64_img(control_image()), "mask": mask}},
        {"module": "inpaint_global_harmonious", "mask": mask})]
    assert [answer.status_code for answer in answers] == [200] * 4, answers[-1].text
    images = [np.asarray(Image.open(io.BytesIO(base64.b64decode(a.json()["images"][0]))).convert("RGB")).astype(int)
              for a in answers]
    assert np.array_equal(images[0], images[1]) and np.array_equal(images[0], images[2])
    far = np.ones((64, 64), bool)
    far[16 - 6:40 + 6, 20 - 6:44 + 6] = False  # rows, columns of the box (20, 16, 44, 40) grown by 6
    picture = np.asarray(control_image()).astype(int)
    assert np.array_equal(images[0][far], picture[far])
    assert not np.array_equal(images[3][far], picture[far])  # inpaint (global harmonious) repaints everything
    infotexts = [a.json()["info"] for a in answers]
    assert "Module: inpaint_only, " in infotexts[0] and "Module: inpaint, " in infotexts[3]


@pytest.mark.parametrize("unit, words", [
    ({"module": "inpaint", "mask": "SMALL"}, ["mask is 32x64 but the unit's image is 64x64", "same size"]),
    ({"module": "inpaint", "mask": 5}, ["mask must be a base64-encoded image", "int"]),
    ({"module": "inpaint", "mask": "@@"}, ["controlnet unit 0 mask"]),
    ({"module": "inpaint_only+lama"}, ["not available", "LaMa", "'inpaint_only'"]),
])
def test_bad_inpaint_units_are_422_naming_what_is_wrong(api, unit, words):
    import requests

    if unit.get("mask") == "SMALL":
        unit = {**unit, "mask": webuiapi.raw_b64_img(Image.new("L", (32, 64), 255))}
    response = requests.post(f"{api.baseurl}/txt2img", json=inpaint_request(**unit), timeout=120)
    assert response.status_code == 422, response.text
    assert all(word in response.text for word in words), response.text


def test_inpaint_modules_are_listed_as_the_extension_lists_them(server, api):
    import requests

    modules = api.custom_get("controlnet/module_list")
    assert {"inpaint", "inpaint_only"} <= set(modules["module_list"])
    assert modules["module_detail"]["inpaint_only"] == {"model_free": False, "sliders": []}
    aliased = requests.get(f"http://127.0.0.1:{server.port}/controlnet/module_list?alias_names=true", timeout=30).json()
    assert "inpaint_global_harmonious" in aliased["module_list"] and "inpaint" not in aliased["module_list"]
    types = api.custom_get("controlnet/control_types")["control_types"]
    assert types["Inpaint"] == {"module_list": ["none", "inpaint", "inpaint_only"], "model_list": ["None"],
                                "default_option": "inpaint_only", "default_model": "None"}


def test_inpaint_only_with_hires_fix_and_a_pair_image_over_http(api):
    """inpaint_only is no longer refused with enable_hr; the unit's image comes as the extension's [image, mask]."""
    import base64
    import io

    import requests

    request = {**inpaint_request(module="inpaint_only",
                                 image=[webuiapi.raw_b64_img(control_image()), webuiapi.raw_b64_img(inpaint_mask())]),
               "enable_hr": True, "hr_scale": 2, "hr_upscaler": "Latent", "hr_second_pass_steps": 1,
               "denoising_strength": 0.6}
    answer = requests.post(f"{api.baseurl}/txt2img", json=request, timeout=120)
    assert answer.status_code == 200, answer.text
    image = Image.open(io.BytesIO(base64.b64decode(answer.json()["images"][0])))
    assert image.size == (128, 128)
    info = answer.json()["info"]
    assert "Module: inpaint_only, " in info and "Hires upscale: 2" in info


def test_a_black_effective_region_mask_gives_exactly_the_image_without_the_unit(api):
    import base64
    import io

    import requests

    plain = {"prompt": "x", "seed": 4, "steps": 2, "width": 64, "height": 64, "sampler_name": "Euler"}
    unit = {"model": "tiny_canny", "module": "none", "image": webuiapi.raw_b64_img(control_image()),
            "effective_region_mask": webuiapi.raw_b64_img(Image.new("L", (16, 16), 0))}
    masked = {**plain, "alwayson_scripts": {"controlnet": {"args": [unit]}}}
    unmasked = {**plain, "alwayson_scripts": {"controlnet": {"args": [{**unit, "effective_region_mask": None}]}}}
    answers = [requests.post(f"{api.baseurl}/txt2img", json=body, timeout=120).json() for body in
               (plain, masked, unmasked)]
    images = [Image.open(io.BytesIO(base64.b64decode(answer["images"][0]))).tobytes() for answer in answers]
    assert images[0] == images[1] and images[0] != images[2]  # pixels: the PNG text differs (ControlNet 0: ...)
