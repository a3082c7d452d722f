"""`/sdapi/v1/img2img` with A1111's `script_name: "Poor man's outpainting"` and its `script_args` [pixels, mask blur,
masked content index, directions], or `"Outpainting mk2"` and its [note, pixels, mask blur, directions, fall-off
exponent, colour variation]: the Python API's outpaint / outpaint_mk2, the args checked and refused with the field
named."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from pipelines.img2img import ImageToImage
from pipelines.outpaint import outpaint
from webui.base64_images import encode_png_base64

from .png_payloads import decode_png

PICTURE = Image.fromarray(np.random.default_rng(4).integers(0, 256, (40, 48, 3), dtype=np.uint8))  # 48x40
REQUEST = {"init_images": [encode_png_base64(PICTURE)], "prompt": "a field", "steps": 3, "seed": 9,
           "sampler_name": "Euler", "denoising_strength": 0.9, "width": 64, "height": 64}


def post(client, **fields):
    return client.post("/sdapi/v1/img2img", json={**REQUEST, "script_name": "Poor man's outpainting", **fields})


def test_the_script_outpaints_as_the_python_api(client, tiny_sd1_dir):
    response = post(client, script_args=[16, 2, 1, ["right", "down"]])
    assert response.status_code == 200, response.text
    payload = response.json()
    [image], infotext = [decode_png(data) for data in payload["images"]], json.loads(payload["info"])["infotexts"][0]
    expected = outpaint(ImageToImage.from_pretrained(tiny_sd1_dir), PICTURE, right=16, bottom=16, mask_blur=2,
                        inpainting_fill="original", denoising_strength=0.9, prompt="a field", steps=3, seed=9,
                        sampler="Euler")
    assert image.size == (64, 56)
    assert image.convert("RGB").tobytes() == expected.images[0].tobytes()
    assert infotext == expected.infotexts[0]
    assert "Mask blur: 4, Masked content: original" in infotext


def test_args_left_out_take_the_scripts_defaults_and_it_is_listed(client):
    response = post(client, script_name="POOR MAN'S OUTPAINTING", script_args=[], steps=1)  # title: any case
    assert response.status_code == 200, response.text
    assert decode_png(response.json()["images"][0]).size == (48 + 256, 40 + 256)  # 128 on all four sides
    assert "Masked content: fill" in json.loads(response.json()["info"])["infotexts"][0]
    assert client.get("/sdapi/v1/scripts").json() == {
        "txt2img": ["prompt matrix", "prompts from file or textbox", "x/y/z plot"],
        "img2img": ["loopback", "outpainting mk2", "poor man's outpainting", "prompt matrix", "prompts from file or textbox",
                    "sd upscale", "soft inpainting", "x/y/z plot"]}


@pytest.mark.parametrize("fields, message", [
    ({"script_args": [16, 2, 7]}, "script_args inpainting_fill must be 0-3"),
    ({"script_args": [16.5]}, "script_args pixels: must be a whole number, got 16.5"),
    ({"script_args": [16, 2, 0, "left"]}, "script_args direction must be a list"),
    ({"script_args": [16, 2, 0, ["north"]]}, "script_args: directions must be a non-empty list among left"),
    ({"script_args": [16, 65]}, "script_args: mask_blur must be an integer in [0, 64]"),
    ({"script_args": [16, 2, 0, ["left"], 1]}, "must be a list of at most 4 values"),
    ({"script_args": [2048]}, "must be in [8, 4096]"),
    ({"script_args": [10 ** 400]}, "script_args pixels: must be a whole number"),  # was an OverflowError: a 500
    ({"script_name": "No such script"}, "script_name='No such script'"),
])
def test_bad_script_args_are_refused_before_the_job(client, fields, message):
    response = post(client, **fields)
    assert response.status_code == 422
    assert message in response.text, response.text


def test_txt2img_has_no_outpainting_script(client):
    response = client.post("/sdapi/v1/txt2img", json={"prompt": "x", "steps": 1, "width": 64, "height": 64,
                                                       "script_name": "Poor man's outpainting"})
    assert response.status_code == 422 and "script_name" in response.text


@pytest.mark.parametrize("args, name", [([float("inf")], "pixels"), ([16, float("nan")], "mask_blur"),
                                        ([16, 2, float("-inf")], "inpainting_fill")])
def test_non_finite_script_args_are_refused_naming_the_arg(args, name):
    """int(inf) raised OverflowError (a 500 over HTTP); the HTTP request model now refuses them first, the Python
    entry point still names the arg."""
    from webui.api_scripts import outpaint_script_params

    with pytest.raises(ValueError, match=f"script_args {name}: must be a whole number"):
        outpaint_script_params(None, args)


def post_mk2(client, **fields):
    return client.post("/sdapi/v1/img2img", json={**REQUEST, "script_name": "Outpainting mk2", **fields})


def test_mk2_outpaints_as_the_python_api_with_a1111s_arg_order(client, tiny_sd1_dir):
    from pipelines.outpaint_mk2 import outpaint_mk2

    # [note slot (ignored), pixels, mask blur, directions, fall-off exponent, colour variation]
    response = post_mk2(client, script_args=["", 16, 2, ["right", "down"], 0.5, 0.3])
    assert response.status_code == 200, response.text
    payload = response.json()
    [image], infotext = [decode_png(data) for data in payload["images"]], json.loads(payload["info"])["infotexts"][0]
    pipe = ImageToImage.from_pretrained(tiny_sd1_dir)
    common = dict(denoising_strength=0.9, prompt="a field", steps=3, seed=9, sampler="Euler")
    expected = outpaint_mk2(pipe, PICTURE, right=16, bottom=16, mask_blur=2, falloff_exponent=0.5,
                            color_variation=0.3, **common)
    assert image.size == (64, 56)
    assert image.convert("RGB").tobytes() == expected.images[0].tobytes()
    assert infotext == expected.infotexts[0]
    assert "Mask blur: 8, Masked content: original" in infotext  # A1111 blurs (and records) 4x the script's
    swapped = outpaint_mk2(pipe, PICTURE, right=16, bottom=16, mask_blur=2, falloff_exponent=0.3,
                           color_variation=0.5, **common)
    assert swapped.images[0].tobytes() != expected.images[0].tobytes()  # the last two args are told apart


def test_mk2_args_left_out_take_its_defaults(client):
    response = post_mk2(client, script_name="outpainting MK2", script_args=[None], steps=1)
    assert response.status_code == 200, response.text
    assert decode_png(response.json()["images"][0]).size == (48 + 256, 40 + 256)  # 128 on all four sides
    assert "Mask blur: 32, Masked content: original" in json.loads(response.json()["info"])["infotexts"][0]


def test_mk2_honours_batch_size_as_a1111s_script(client):
    response = post_mk2(client, script_args=[0, 8, 1, ["right"]], steps=1, batch_size=2)
    assert response.status_code == 200, response.text
    images = [decode_png(data) for data in response.json()["images"]]
    assert [image.size for image in images] == [(56, 40), (56, 40)], len(images)
    assert json.loads(response.json()["info"])["all_seeds"] == [9, 10]


@pytest.mark.parametrize("args, message", [
    ([0, 7], "script_args: pixels must be an integer in [8, 256] for Outpainting mk2"),
    ([0, 16.5], "script_args pixels: must be a whole number, got 16.5"),
    ([0, 16, 33], "script_args: mask_blur must be an integer in [0, 32] for Outpainting mk2"),
    ([0, 16, 2, "left"], "script_args direction must be a list"),
    ([0, 16, 2, ["north"]], "script_args: directions must be a non-empty list among left"),
    ([0, 16, 2, ["left"], 4.5], "script_args: falloff_exponent must be a number in [0, 4]"),
    ([0, 16, 2, ["left"], 1, "much"], "script_args color_variation: must be a number, got 'much'"),
    ([0, 16, 2, ["left"], 1, 0.05, 7], "must be a list of at most 6 values: [info, pixels, mask_blur, direction"),
])
def test_bad_mk2_script_args_are_refused_before_the_job(client, args, message):
    response = post_mk2(client, script_args=args)
    assert response.status_code == 422
    assert message in response.text, response.text


@pytest.mark.parametrize("args, name", [([0, float("inf")], "pixels"), ([0, 16, float("nan")], "mask_blur"),
                                        ([0, 16, 2, ["left"], float("nan")], "falloff_exponent"),
                                        ([0, 16, 2, ["left"], 1, float("-inf")], "color_variation"),
                                        ([0, 16, 2, ["left"], 1, True], "color_variation")])
def test_non_finite_mk2_script_args_are_refused_naming_the_arg(args, name):
    from webui.api_scripts import mk2_script_params

    with pytest.raises(ValueError, match=f"script_args {name}: must be a"):
        mk2_script_params(None, args)


def test_script_info_lists_the_scripts_and_their_defaults_are_the_scripts_own(client):
    """A client that builds `script_args` from /script-info's values gets each script's defaults, in order."""
    from PIL import Image

    from pipelines.img2img import Img2ImgParams
    from webui.api_scripts import mk2_script_params, outpaint_script_params

    info = {script["name"]: script for script in client.get("/sdapi/v1/script-info").json() if script["is_img2img"]}
    assert sorted(info) == sorted(client.get("/sdapi/v1/scripts").json()["img2img"])
    assert all(script["is_img2img"] and script["is_alwayson"] == (name == "soft inpainting")
               for name, script in info.items())
    params = Img2ImgParams(init_images=[Image.new("RGB", (64, 64))], width=64, height=64)
    poor = [arg["value"] for arg in info["poor man's outpainting"]["args"]]
    assert [arg["label"] for arg in info["poor man's outpainting"]["args"]] == [
        "Pixels to expand", "Mask blur", "Masked content", "Outpainting direction"]
    assert outpaint_script_params(params, poor)[1] == outpaint_script_params(params, [])[1]
    mk2 = [arg["value"] for arg in info["outpainting mk2"]["args"]]
    assert len(mk2) == 6 and info["outpainting mk2"]["args"][2]["maximum"] == 32  # mixkit's bound, not A1111's 64
    assert mk2_script_params(params, mk2)[1:] == mk2_script_params(params, [])[1:]
