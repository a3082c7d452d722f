"""/sdapi/v1/img2img on an instruct-pix2pix checkpoint: `image_cfg_scale` runs and is recorded, a request that leaves
it out runs A1111's plain CFG and records nothing, the infotext posted back reproduces the image, and txt2img is
refused saying why."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from webui.base64_images import encode_png_base64

from .png_payloads import decode_png


@pytest.fixture(scope="module")
def server(tiny_ip2p_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("api-ip2p")
    with serving(ServerConfig(models=[str(tiny_ip2p_dir)], output_dir=str(root / "outputs"), ui=False)) as running:
        yield running


def body(**fields) -> dict:
    photo = Image.fromarray(np.random.default_rng(5).integers(0, 256, (64, 64, 3), dtype=np.uint8))
    return {"init_images": [encode_png_base64(photo)], "prompt": "make it red", "steps": 2, "seed": 3, "width": 64,
            "height": 64, "sampler_name": "Euler", **fields}


def post(client, payload: dict) -> tuple[Image.Image, str]:
    response = client.post("/sdapi/v1/img2img", json=payload)
    assert response.status_code == 200, response.text
    answer = response.json()
    return decode_png(answer["images"][0]), json.loads(answer["info"])["infotexts"][0]


def test_image_cfg_scale_is_run_recorded_and_read_back_from_the_infotext(client):
    image, infotext = post(client, body(image_cfg_scale=1.75))
    assert "Image CFG scale: 1.75," in infotext
    other, _ = post(client, body(image_cfg_scale=1.0))
    assert image.tobytes() != other.tobytes()
    again, again_infotext = post(client, {"init_images": body()["init_images"], "infotext": infotext})
    assert again_infotext == infotext
    assert again.tobytes() == image.tobytes()


def test_left_out_it_runs_as_one_and_is_not_recorded_as_a1111s_api(client):
    image, infotext = post(client, body())
    assert "Image CFG scale" not in infotext
    at_one, _ = post(client, body(image_cfg_scale=1.0))
    assert image.tobytes() == at_one.tobytes()


def test_an_out_of_range_value_is_a_422_naming_it(client):
    response = client.post("/sdapi/v1/img2img", json=body(image_cfg_scale=-1))
    assert response.status_code == 422
    assert "image_cfg_scale must be a number in [0, 100]" in response.text


def test_txt2img_is_refused_saying_to_use_img2img(client):
    response = client.post("/sdapi/v1/txt2img", json={"prompt": "a cat", "steps": 2, "width": 64, "height": 64})
    assert response.status_code == 422, response.text
    assert "is an instruct-pix2pix checkpoint" in response.text and "Use img2img" in response.text
