"""`/sdapi/v1/img2img` with `script_name: "sd upscale"` and A1111's positional script_args [info, overlap,
upscaler_index, scale_factor]: the registered script through the job queue (pipelines/scripts/sd_upscale.py,
webui/api_selectable_scripts.py)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from PIL import Image

from pipelines.infotext import parse_infotext
from webui.base64_images import encode_png_base64

from .png_payloads import decode_png

TINY = {"prompt": "a red cat", "steps": 1, "seed": 3, "sampler_name": "Euler", "width": 64, "height": 64,
        "denoising_strength": 0.4}


def upscale(client, script_args, kind="img2img", size=(48, 48), **fields):
    picture = Image.new("RGB", size, (200, 30, 30))
    return client.post(f"/sdapi/v1/{kind}", json={**TINY, "init_images": [encode_png_base64(picture)],
                                                  "script_name": "SD upscale", "script_args": script_args, **fields})


def upscaler_index(client, name: str) -> int:
    return [entry["name"] for entry in client.get("/sdapi/v1/upscalers").json()].index(name)


def test_upscale_answers_with_the_joined_picture_and_the_tiles_infotext(client, server):
    out = server.state.output_dir
    before = set(os.listdir(out)) if os.path.isdir(out) else set()
    response = upscale(client, ["", 32, upscaler_index(client, "Lanczos"), 2], save_images=True, n_iter=2)
    assert response.status_code == 200, response.text
    payload = response.json()
    images = [decode_png(data) for data in payload["images"]]
    assert [image.size for image in images] == [(96, 96), (96, 96)]  # 48 px x 2, one per n_iter
    info = json.loads(payload["info"])
    assert info["index_of_first_image"] == 0
    read = parse_infotext(images[1].info["parameters"])
    assert (read["Seed"], read["Size-1"], read["SD upscale overlap"], read["SD upscale upscaler"]) == (
        "4", "64", "32", "Lanczos")  # upscale 2 starts at seed + 1; Size is the tile's
    new = [name for name in sorted(set(os.listdir(out)) - before) if name.endswith(".png")]
    assert len(new) == 2 and Image.open(os.path.join(out, new[0])).size == (96, 96)


def test_the_upscaler_is_taken_by_name_too_and_none_keeps_the_size(client):
    response = upscale(client, [None, 16, "none", 3], size=(80, 64))
    assert response.status_code == 200, response.text
    assert decode_png(response.json()["images"][0]).size == (80, 64)


@pytest.mark.parametrize("args, fields, message", [
    (["", 64, 1, 2], {}, "Tile overlap 64 must be at least 0 and less than the tile size 64x64"),
    (["", 32, 999, 2], {}, "upscaler_index) 999 is out of range: 0.."),
    (["", 32, "Nope", 2], {}, "must be an index into or a name from the upscalers ['None', 'Lanczos'"),
    (["", 32, 1, 0.5], {}, "Scale Factor) must be a number in [1.0, 8.0]"),
    (["", 32, 1, 8], {"size": (800, 800)}, "over the budget"),
    (["", 32, 1, 1], {"size": (40, 40)}, "smaller than one tile (64x64)"),
])
def test_bad_requests_are_refused_before_queueing(client, args, fields, message):
    response = upscale(client, args, **fields)
    assert response.status_code == 422 and message in response.json()["detail"], response.text


def test_txt2img_is_refused(client):
    response = client.post("/sdapi/v1/txt2img", json={**TINY, "script_name": "sd upscale", "script_args": []})
    assert response.status_code == 422 and "runs for img2img, not txt2img" in response.text


def test_listed_for_img2img_with_the_servers_upscalers(client):
    assert "sd upscale" in client.get("/sdapi/v1/scripts").json()["img2img"]
    assert "sd upscale" not in client.get("/sdapi/v1/scripts").json()["txt2img"]
    [entry] = [entry for entry in client.get("/sdapi/v1/script-info").json() if entry["name"] == "sd upscale"]
    assert entry["is_img2img"] and not entry["is_alwayson"]
    labels = [arg["label"] for arg in entry["args"]]
    assert labels == [None, "Tile overlap", "Upscaler", "Scale Factor"]
    names = [item["name"] for item in client.get("/sdapi/v1/upscalers").json()]
    assert entry["args"][2]["choices"] == names and entry["args"][2]["value"] == "None"
    assert (entry["args"][1]["value"], entry["args"][3]["value"]) == (64, 2.0)


def test_the_answer_is_the_python_apis_upscale_of_the_same_request(client, tiny_sd1_dir):
    """The HTTP run is the Python run: same tiles, seeds and blended join (pipelines.scripts.sd_upscale)."""
    from pipelines.img2img import ImageToImage, Img2ImgParams
    from pipelines.scripts import sd_upscale

    picture = Image.fromarray(np.random.default_rng(5).integers(0, 256, (48, 48, 3), dtype=np.uint8))
    response = client.post("/sdapi/v1/img2img", json={
        **TINY, "init_images": [encode_png_base64(picture)], "script_name": "sd upscale",
        "script_args": ["", 32, upscaler_index(client, "Lanczos"), 2], "batch_size": 2})
    assert response.status_code == 200, response.text
    served = decode_png(response.json()["images"][0])
    pipe = ImageToImage.from_pretrained(tiny_sd1_dir)
    params = Img2ImgParams(prompt="a red cat", steps=1, seed=3, sampler="Euler", width=64, height=64,
                           denoising_strength=0.4, init_images=[picture], batch_size=2)
    local = sd_upscale.run(pipe, params, sd_upscale.sd_upscale_config(2, "Lanczos", 32)).images[0]
    assert np.array_equal(np.asarray(served.convert("RGB")), np.asarray(local))
