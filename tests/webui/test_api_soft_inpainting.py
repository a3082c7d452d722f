"""`alwayson_scripts: {"soft inpainting": {"args": [...]}}` on /sdapi/v1/img2img (webui/api_soft_inpainting.py), its
args checked slot by slot, its infotext keys pasted back through the request's `infotext`, and /script-info."""

from __future__ import annotations

import base64
import io
import json

import pytest
from PIL import Image

from pipelines.params import GenerationLimits
from pipelines.soft_inpainting import SoftInpainting
from webui.api_convert import RequestLimits, to_img2img_params
from webui.api_infotext import apply_infotext
from webui.api_requests import Img2ImgRequest, Txt2ImgRequest
from webui.api_soft_inpainting import soft_inpainting_from_infotext, soft_inpainting_from_scripts
from webui.base64_images import encode_png_base64

A1111_ARGS = [True, 1, 0.5, 4, 0, 0.5, 2]


def inputs() -> dict:
    picture = Image.new("RGB", (64, 64), (30, 60, 200))
    picture.paste((240, 200, 20), (8, 8, 40, 40))
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (24, 24, 40, 40))
    return {"init_images": [encode_png_base64(picture)], "mask": encode_png_base64(mask), "width": 64, "height": 64}


def params(**fields):
    return to_img2img_params(Img2ImgRequest(**inputs(), **fields), limits=GenerationLimits(),
                             request_limits=RequestLimits(), lora_names=None)


def test_a1111s_args_reach_the_params_and_off_or_absent_is_none():
    assert params(alwayson_scripts={"soft inpainting": {"args": A1111_ARGS}}).soft_inpainting == SoftInpainting()
    assert params(alwayson_scripts={"Soft Inpainting": {"args": [True, 2.5]}}).soft_inpainting == SoftInpainting(2.5)
    assert params(alwayson_scripts={"Soft Inpainting": {"args": [False, 99]}}).soft_inpainting is None
    assert params().soft_inpainting is None


def test_a_transparent_masks_soft_alpha_is_kept_as_a1111s_script_turns_mask_round_off():
    canvas = Image.new("RGBA", (64, 64), (0, 0, 0, 0))
    canvas.paste((255, 255, 255, 100), (24, 24, 40, 40))
    fields = {**inputs(), "mask": encode_png_base64(canvas)}
    plain = to_img2img_params(Img2ImgRequest(**fields), limits=GenerationLimits(), request_limits=RequestLimits(),
                              lora_names=None)
    soft = to_img2img_params(Img2ImgRequest(**fields, alwayson_scripts={"soft inpainting": {"args": A1111_ARGS}}),
                             limits=GenerationLimits(), request_limits=RequestLimits(), lora_names=None)
    assert (plain.mask.getpixel((30, 30)), soft.mask.getpixel((30, 30))) == (0, 100)


@pytest.mark.parametrize("args, message", [
    ([True, 9], r"args\[1\] \(Schedule bias\) must be a number in \[0, 8\], got 9"),
    ([True, 1, 0.5, 0.5], r"args\[3\] \(Transition contrast boost\) must be a number in \[1, 32\], got 0.5"),
    ([True, 1, 0.5, 4, "0"], r"args\[4\] \(Mask influence\) must be a number in \[0, 1\], got '0'"),
    ([True, 1, 0.5, 4, 0, 0.5, False], r"args\[6\] \(Difference contrast\)"),
    (["yes"], r"args\[0\] \(enabled\) must be true or false"),
    ([True, 10**400], r"args\[1\] \(Schedule bias\) must be a number in \[0, 8\]"),  # not an OverflowError (500)
    ([True, 1, float("nan")], r"args\[2\] \(Preservation strength\) must be a number in \[0, 8\], got nan"),
    ([*A1111_ARGS, 1], r"has 8 values; Soft inpainting takes 7"),
])
def test_bad_args_are_refused_naming_the_slot(args, message):
    with pytest.raises(ValueError, match=message):
        soft_inpainting_from_scripts({"soft inpainting": {"args": args}})


def post(client, **fields):
    return client.post("/sdapi/v1/img2img", json={**inputs(), "prompt": "a box", "steps": 2, "seed": 3,
                                                  "sampler_name": "Euler", "denoising_strength": 0.75, **fields})


def pixels(response) -> bytes:
    return Image.open(io.BytesIO(base64.b64decode(response.json()["images"][0]))).convert("RGB").tobytes()


def test_the_script_runs_and_is_recorded(client):
    hard = post(client)
    soft = post(client, alwayson_scripts={"soft inpainting": {"args": A1111_ARGS}})
    assert soft.status_code == 200, soft.text
    assert pixels(soft) != pixels(hard)
    infotext = json.loads(soft.json()["info"])["infotexts"][0]
    assert ("Mask blur: 4, Soft inpainting enabled: True, Soft inpainting schedule bias: 1, Soft inpainting "
            "preservation strength: 0.5, Soft inpainting transition contrast boost: 4, Soft inpainting mask "
            "influence: 0, Soft inpainting difference threshold: 0.5, Soft inpainting difference contrast: 2") \
        in infotext
    # the infotext posted back reproduces the image
    again = post(client, infotext=infotext)
    assert again.status_code == 200, again.text
    assert pixels(again) == pixels(soft)


def test_out_of_range_arg_is_a_422_naming_it(client):
    response = post(client, alwayson_scripts={"soft inpainting": {"args": [True, 1, 9]}})
    assert response.status_code == 422
    assert "args[2] (Preservation strength) must be a number in [0, 8], got 9" in response.text


def test_switched_on_in_txt2img_is_refused(client):
    response = client.post("/sdapi/v1/txt2img", json={"prompt": "a box", "steps": 1, "width": 64, "height": 64,
                                                      "alwayson_scripts": {"soft inpainting": {"args": A1111_ARGS}}})
    assert response.status_code == 422
    assert "switched on in txt2img" in response.text


def test_infotext_fills_the_script_unless_the_request_sends_it():
    text = ("a box\nSteps: 2, Sampler: Euler, Mask blur: 4, Soft inpainting enabled: True, "
            "Soft inpainting schedule bias: 2.5, Soft inpainting difference contrast: 3")
    pasted = apply_infotext(Img2ImgRequest(**inputs(), infotext=text))
    assert pasted.alwayson_scripts == {"soft inpainting": {"args": [True, 2.5, 0.5, 4.0, 0.0, 0.5, 3.0]}}
    own = {"Soft Inpainting": {"args": [False]}}
    assert apply_infotext(Img2ImgRequest(**inputs(), infotext=text, alwayson_scripts=own)).alwayson_scripts == own
    assert apply_infotext(Txt2ImgRequest(infotext=text)).alwayson_scripts == {}  # txt2img has no such script


def test_infotext_reading_needs_enabled_and_names_a_bad_number():
    assert soft_inpainting_from_infotext({"Soft inpainting schedule bias": "2"}) is None
    with pytest.raises(ValueError, match="infotext: Soft inpainting mask influence: 'high' is not a number"):
        soft_inpainting_from_infotext({"Soft inpainting enabled": "True", "Soft inpainting mask influence": "high"})


def test_script_info_lists_soft_inpainting_with_a1111s_sliders(client):
    info = {script["name"]: script for script in client.get("/sdapi/v1/script-info").json()}
    soft = info["soft inpainting"]
    assert (soft["is_alwayson"], soft["is_img2img"]) == (True, True)
    assert [(arg["label"], arg["value"], arg["minimum"], arg["maximum"], arg["step"]) for arg in soft["args"]] == [
        ("Soft inpainting", False, None, None, None), ("Schedule bias", 1.0, 0.0, 8.0, 0.1),
        ("Preservation strength", 0.5, 0.0, 8.0, 0.05), ("Transition contrast boost", 4.0, 1.0, 32.0, 0.5),
        ("Mask influence", 0.0, 0.0, 1.0, 0.05), ("Difference threshold", 0.5, 0.0, 8.0, 0.25),
        ("Difference contrast", 2.0, 0.0, 8.0, 0.25)]
    values = [arg["value"] for arg in soft["args"]]
    assert soft_inpainting_from_scripts({"soft inpainting": {"args": [True, *values[1:]]}}) == SoftInpainting()
