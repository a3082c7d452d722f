"""`/sdapi/v1/img2img` with A1111's `script_name: "Poor man's outpainting"` and its `script_args` [pixels, mask blur,
masked content index, directions]: the Python API's outpaint, the args checked and refused with the field named."""

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
    assert client.get("/sdapi/v1/scripts").json() == {"txt2img": [], "img2img": ["poor man's outpainting"]}


@pytest.mark.parametrize("fields, message", [
    ({"script_args": [16, 2, 7]}, "script_args inpainting_fill must be 0-3"),
    ({"script_args": [16.5]}, "script_args pixels: must be a whole number, got 16.5"),
    ({"script_args": [16, 2, 0, "left"]}, "script_args direction must be a list"),
    ({"script_args": [16, 2, 0, ["north"]]}, "script_args: directions must be a non-empty list among left"),
    ({"script_args": [16, 65]}, "script_args: mask_blur must be an integer in [0, 64]"),
    ({"script_args": [16, 2, 0, ["left"], 1]}, "must be a list of at most 4 values"),
    ({"script_args": [2048]}, "must be in [8, 4096]"),
    ({"script_name": "Loopback"}, "script_name='Loopback'"),
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
