"""`/sdapi/v1/img2img` with `script_name: "loopback"`: A1111's positional script_args, the loops' grid then each loop's
image with its own denoising strength, CLIP interrogation from the server's Interrogate CLIP, and refusals
(webui/api_selectable_scripts.py with pipelines/scripts/loopback.py)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from PIL import Image

from pipelines.infotext import parse_infotext
from webui.base64_images import encode_png_base64

from .png_payloads import decode_png

PICTURE = Image.fromarray(np.random.default_rng(3).integers(0, 255, (64, 64, 3), dtype=np.uint8))
TINY = {"prompt": "a red cat", "steps": 2, "seed": 3, "sampler_name": "Euler", "width": 64, "height": 64,
        "denoising_strength": 0.75, "init_images": [encode_png_base64(PICTURE)]}


def loop(client, script_args, **fields):
    return client.post("/sdapi/v1/img2img", json={**TINY, "script_name": "Loopback", "script_args": script_args,
                                                  **fields})


def test_loops_answer_with_the_grid_then_each_loop(client, server):
    out = server.state.output_dir
    before = set(os.listdir(out)) if os.path.isdir(out) else set()
    response = loop(client, [3, 0.25, "Linear", "None"], save_images=True)
    assert response.status_code == 200, response.text
    payload = response.json()
    info = json.loads(payload["info"])
    images = [decode_png(data) for data in payload["images"]]
    assert [image.size for image in images] == [(192, 64), (64, 64), (64, 64), (64, 64)]
    assert info["index_of_first_image"] == 1
    texts = [parse_infotext(text) for text in info["infotexts"][1:]]
    assert [(t["Denoising strength"], t["Seed"], t["Final denoising strength"], t["Denoising curve"])
            for t in texts] == [("0.75", "3", "0.25", "Linear"), ("0.5", "4", "0.25", "Linear"),
                                ("0.25", "5", "0.25", "Linear")]
    assert [parse_infotext(image.info["parameters"])["Denoising strength"] for image in images[1:]] == [
        "0.75", "0.5", "0.25"]
    new = sorted(set(os.listdir(out)) - before)
    assert len([name for name in new if name.startswith("grid-") and name.endswith(".png")]) == 1
    assert len([name for name in new if name.endswith(".png") and not name.startswith("grid-")]) == 3


def test_a_loop_redraws_the_image_the_loop_before_returned(client):
    """Loop 2 of a 2-loop run is one plain img2img of loop 1's output at the final strength and the next seed."""
    looped = [decode_png(data) for data in loop(client, [2, 0.5]).json()["images"]]
    again = client.post("/sdapi/v1/img2img", json={**TINY, "seed": 4, "denoising_strength": 0.5,
                                                   "init_images": [encode_png_base64(looped[1])]})
    assert again.status_code == 200, again.text
    assert np.array_equal(np.asarray(decode_png(again.json()["images"][0])), np.asarray(looped[2]))


def test_clip_appends_the_servers_interrogation_of_each_init_image(client):
    response = loop(client, [2, 0.5, "Lazy", "CLIP"])
    assert response.status_code == 200, response.text
    images = [decode_png(data) for data in response.json()["images"]]
    prompts = [parse_infotext(text)["Prompt"] for text in json.loads(response.json()["info"])["infotexts"][1:]]
    asked = client.post("/sdapi/v1/interrogate", json={"image": encode_png_base64(images[1]), "model": "clip"})
    assert asked.status_code == 200, asked.text
    assert prompts[1] == f"a red cat, {asked.json()['caption']}"
    first = client.post("/sdapi/v1/interrogate", json={"image": TINY["init_images"][0], "model": "clip"})
    assert prompts[0] == f"a red cat, {first.json()['caption']}"


def test_script_info_lists_loopback_for_img2img_only(client):
    entries = [entry for entry in client.get("/sdapi/v1/script-info").json() if entry["name"] == "loopback"]
    assert [entry["is_img2img"] for entry in entries] == [True]
    assert [arg["label"] for arg in entries[0]["args"]] == [
        "Loops", "Final denoising strength", "Denoising strength curve", "Append interrogated prompt at each iteration"]
    assert "loopback" in client.get("/sdapi/v1/scripts").json()["img2img"]


@pytest.mark.parametrize("args, message", [
    ([0], "Loopback: script_args loops must be a whole number from 1 to 32"),
    ([33], "from 1 to 32"),
    ([4, 1.5], "final_denoising_strength must be a number from 0 to 1"),
    ([4, 0.5, "Steep"], "denoising_curve must be one of"),
    ([4, 0.5, "Linear", "DeepBooru"], "needs a DeepBooru tagger and none is configured"),
    ([4, 0.5, "Linear", "DeepBooru"], "when started with --deepdanbooru-models-path FOLDER"),
])
def test_bad_script_args_are_refused_before_queueing(client, args, message):
    response = loop(client, args)
    assert response.status_code == 422 and message in response.json()["detail"], response.text


def test_txt2img_cannot_run_loopback(client):
    response = client.post("/sdapi/v1/txt2img", json={"prompt": "x", "script_name": "loopback", "script_args": []})
    assert response.status_code == 422 and "runs for img2img, not txt2img" in response.json()["detail"], response.text
