"""`override_settings.sd_model_checkpoint` through the real HTTP app: the request runs on its checkpoint (found by any
title `sd_model_checkpoint` accepts), its image and `info` say so, and the server's checkpoint is back afterwards
(or stays replaced with `override_settings_restore_afterwards: false`), also after a request that failed; a
checkpoint that does not load is a 422 that leaves the server's in place."""

from __future__ import annotations

import hashlib
import json
import threading

import httpx
import numpy as np
import pytest

from .png_payloads import decode_png

SMALL = {"prompt": "a red cube", "seed": 3, "steps": 2, "width": 64, "height": 64, "sampler_name": "Euler"}


@pytest.fixture(scope="module")
def server(single_file_checkpoints, single_file_serving, tmp_path_factory):
    with single_file_serving(single_file_checkpoints, tmp_path_factory.mktemp("request-checkpoint")) as running:
        yield running


def generate(client, route: str = "txt2img", **body):
    response = client.post(f"/sdapi/v1/{route}", json={**SMALL, **body})
    assert response.status_code == 200, response.text
    payload = response.json()
    image = decode_png(payload["images"][0])
    return np.asarray(image.convert("RGB")), image.info["parameters"], json.loads(payload["info"])


def model_of(infotext: str) -> str:
    return infotext.split("Model: ")[1].split(",")[0]


def server_checkpoint(client) -> str:
    return client.get("/sdapi/v1/options").json()["sd_model_checkpoint"]


@pytest.fixture(scope="module")
def images(server):
    """The test image on each checkpoint, made after switching to it with /sdapi/v1/options; sd1 is loaded after."""
    made = {}
    with httpx.Client(base_url=server.url, timeout=120) as client:
        for name in ("other.safetensors", "sd1.safetensors"):
            assert client.post("/sdapi/v1/options", json={"sd_model_checkpoint": name}).status_code == 200
            made[name] = generate(client)
    assert not np.array_equal(made["other.safetensors"][0], made["sd1.safetensors"][0])  # the test can tell them apart
    return made


def test_a_request_runs_on_its_checkpoint_and_the_servers_is_back_afterwards(client, images):
    server_title = server_checkpoint(client)
    assert server_title.startswith("sd1.safetensors [")
    pixels, infotext, info = generate(client, override_settings={"sd_model_checkpoint": "other"})
    assert np.array_equal(pixels, images["other.safetensors"][0])
    assert model_of(infotext) == "other" and info["sd_model_name"] == "other"
    assert info["sd_model_hash"] == images["other.safetensors"][2]["sd_model_hash"]
    assert server_checkpoint(client) == server_title
    pixels, infotext, info = generate(client)
    assert np.array_equal(pixels, images["sd1.safetensors"][0]) and info["sd_model_name"] == "sd1"


def test_img2img_runs_on_its_checkpoint_too(client, images):
    from webui.base64_images import encode_png_base64
    from PIL import Image

    source = encode_png_base64(Image.fromarray(images["sd1.safetensors"][0]))
    body = {"init_images": [source], "denoising_strength": 0.5}
    on_other, infotext, _ = generate(client, "img2img", override_settings={"sd_model_checkpoint": "other"}, **body)
    assert model_of(infotext) == "other" and server_checkpoint(client).startswith("sd1.safetensors")
    assert client.post("/sdapi/v1/options", json={"sd_model_checkpoint": "other"}).status_code == 200
    try:
        assert np.array_equal(generate(client, "img2img", **body)[0], on_other)
    finally:
        client.post("/sdapi/v1/options", json={"sd_model_checkpoint": "sd1.safetensors"})


def test_every_title_form_of_sd_model_checkpoint_is_accepted(client, images, single_file_checkpoints):
    sha256 = hashlib.sha256((single_file_checkpoints / "other.safetensors").read_bytes()).hexdigest()
    short = sha256[:10]  # known to the server: loading other.safetensors hashed it
    for name in (f"other.safetensors [{short}]", "other.safetensors", "other", short, sha256, f"other [{short}]"):
        pixels, infotext, _ = generate(client, override_settings={"sd_model_checkpoint": name})
        assert np.array_equal(pixels, images["other.safetensors"][0]) and model_of(infotext) == "other", name
    assert server_checkpoint(client).startswith("sd1.safetensors")


def test_restore_afterwards_false_keeps_the_requests_checkpoint_as_the_servers(client, server, images):
    try:
        generate(client, override_settings={"sd_model_checkpoint": "other"}, override_settings_restore_afterwards=False)
        assert server_checkpoint(client).startswith("other.safetensors [")
        saved = json.loads(open(server.state.options.settings_file).read())["sd_model_checkpoint"]
        assert saved.startswith("other.safetensors")  # remembered for the next start, as an options switch is
        pixels, infotext, _ = generate(client)
        assert np.array_equal(pixels, images["other.safetensors"][0]) and model_of(infotext) == "other"
    finally:
        client.post("/sdapi/v1/options", json={"sd_model_checkpoint": "sd1.safetensors"})


def test_a_request_that_fails_on_its_checkpoint_still_puts_the_servers_back(client, images):
    # the tiny text encoder has 5 layers: the pipeline refuses clip skip 8 once it runs on the request's checkpoint
    response = client.post("/sdapi/v1/txt2img", json={**SMALL, "override_settings": {
        "sd_model_checkpoint": "other", "CLIP_stop_at_last_layers": 8}})
    assert response.status_code == 422 and "clip_skip must be an int in 1..5" in response.json()["detail"]
    assert server_checkpoint(client).startswith("sd1.safetensors")
    assert np.array_equal(generate(client)[0], images["sd1.safetensors"][0])


def test_a_checkpoint_that_does_not_load_is_a_422_and_the_servers_stays(client, server, images):
    model = server.state.holder.txt2img().model
    response = client.post("/sdapi/v1/txt2img", json={**SMALL, "override_settings": {
        "sd_model_checkpoint": "broken.safetensors"}})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail.startswith("Could not load checkpoint 'broken.safetensors' (override_settings.sd_model_checkpoint): ")
    assert detail.endswith(f"the server's checkpoint {server_checkpoint(client)!r} is unchanged.")
    assert server.state.holder.txt2img().model is model  # not even reloaded
    assert np.array_equal(generate(client)[0], images["sd1.safetensors"][0])


def test_an_unknown_checkpoint_is_refused_before_queueing_listing_the_titles(client, server):
    response = client.post("/sdapi/v1/txt2img", json={**SMALL, "override_settings": {"sd_model_checkpoint": "sd15"}})
    assert response.status_code == 422
    assert response.json()["detail"].startswith("override_settings.sd_model_checkpoint: Unknown checkpoint 'sd15'; "
                                                "available: broken.safetensors, other.safetensors [")
    assert server.state.worker.queued == 0


def test_the_refiner_is_told_apart_from_the_requests_checkpoint_not_the_servers(client):
    # A1111's apply_refiner does nothing when the refiner is the checkpoint already sampling. (A refiner other than
    # that one would be loaded by the pipeline from its file, without the configs these tiny files need.)
    body = {"override_settings": {"sd_model_checkpoint": "other"}, "refiner_checkpoint": "other",
            "refiner_switch_at": 0.5}
    _, infotext, _ = generate(client, **body)
    assert model_of(infotext) == "other" and "Refiner:" not in infotext
    assert server_checkpoint(client).startswith("sd1.safetensors")


def test_concurrent_requests_each_run_on_their_own_checkpoint(server, images):
    wanted = ["other", None, "other", None, "sd1"]
    answers = [None] * len(wanted)

    def send(index: int, name: str | None) -> None:
        body = {"override_settings": {"sd_model_checkpoint": name}} if name else {}
        with httpx.Client(base_url=server.url, timeout=300) as client:
            answers[index] = generate(client, **body)

    threads = [threading.Thread(target=send, args=(i, name)) for i, name in enumerate(wanted)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, (pixels, infotext, _) in zip(wanted, answers):
        expected = "other.safetensors" if name == "other" else "sd1.safetensors"
        assert model_of(infotext) == expected.split(".")[0] and np.array_equal(pixels, images[expected][0]), name
    assert server.state.model_title.startswith("sd1.safetensors")


def test_a_webuiapi_client_overrides_the_checkpoint_per_call(server, images):
    webuiapi = pytest.importorskip("webuiapi", reason="test dependency webuiapi is not installed")
    api = webuiapi.WebUIApi(host="127.0.0.1", port=server.port, sampler="Euler", steps=2)
    result = api.txt2img(prompt=SMALL["prompt"], seed=SMALL["seed"], width=64, height=64,
                         override_settings={"sd_model_checkpoint": "other"})
    assert np.array_equal(np.asarray(result.image.convert("RGB")), images["other.safetensors"][0])
    assert result.info["sd_model_name"] == "other"
    assert api.util_get_current_model().startswith("sd1.safetensors")
