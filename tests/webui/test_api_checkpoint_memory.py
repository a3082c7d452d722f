"""A1111's `POST /sdapi/v1/unload-checkpoint` / `reload-checkpoint` through the real HTTP app: unloading releases
the model (nothing holds it any more) while `sd_model_checkpoint` keeps naming it; reloading, or simply generating,
brings back the same model (the same image); a reload that fails is a 422 and leaves it unloaded."""

from __future__ import annotations

import gc
import json
import shutil
import weakref

import httpx
import numpy as np
import pytest

from .png_payloads import decode_png

SMALL = {"prompt": "a red cube", "seed": 3, "steps": 2, "width": 64, "height": 64, "sampler_name": "Euler"}


@pytest.fixture(scope="module")
def models(single_file_checkpoints, tmp_path_factory):
    """Copies of the single files, which a test may damage and mend."""
    folder = tmp_path_factory.mktemp("memory-models")
    for name in ("sd1.safetensors", "other.safetensors"):
        shutil.copy(single_file_checkpoints / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def server(models, single_file_serving, tmp_path_factory):
    with single_file_serving(models, tmp_path_factory.mktemp("memory")) as running:
        yield running


@pytest.fixture(scope="module")
def image(server):
    with httpx.Client(base_url=server.url, timeout=120) as client:
        return generate(client)


def generate(client, **body):
    response = client.post("/sdapi/v1/txt2img", json={**SMALL, **body})
    assert response.status_code == 200, response.text
    payload = response.json()
    return np.asarray(decode_png(payload["images"][0]).convert("RGB")), json.loads(payload["info"])


def server_checkpoint(client) -> str:
    return client.get("/sdapi/v1/options").json()["sd_model_checkpoint"]


def unload(client) -> None:
    response = client.post("/sdapi/v1/unload-checkpoint")
    assert (response.status_code, response.json()) == (200, {})


def test_unload_releases_the_model_and_reload_brings_back_the_same_one(client, server, image):
    title = server_checkpoint(client)
    model = weakref.ref(server.state.holder.txt2img().model)
    unload(client)
    gc.collect()
    assert model() is None  # nothing holds the weights any more: their memory is the system's again
    assert server.state.holder.unloaded and server_checkpoint(client) == title  # A1111's option keeps its value
    from webui.ui.settings_tab import status_line

    assert status_line(server.state).startswith(f"Unloaded (reloads on the next generation): **{title}**")
    unload(client)  # already unloaded: nothing to do
    response = client.post("/sdapi/v1/reload-checkpoint")
    assert (response.status_code, response.json()) == (200, {})
    assert server.state.holder.loaded and server_checkpoint(client) == title
    assert status_line(server.state).startswith(f"Loaded: **{title}**")
    reloaded = server.state.holder.txt2img().model
    assert client.post("/sdapi/v1/reload-checkpoint").status_code == 200  # loaded: nothing to do
    assert server.state.holder.txt2img().model is reloaded
    pixels, info = generate(client)
    assert np.array_equal(pixels, image[0]) and info["sd_model_hash"] == image[1]["sd_model_hash"]


def test_a_generation_after_unload_reloads_the_checkpoint_by_itself(client, server, image):
    unload(client)
    assert np.array_equal(generate(client)[0], image[0])
    assert server.state.holder.loaded


def test_a_request_on_another_checkpoint_leaves_an_unloaded_server_checkpoint_unloaded(client, server, image):
    title = server_checkpoint(client)
    unload(client)
    assert generate(client, override_settings={"sd_model_checkpoint": "other"})[1]["sd_model_name"] == "other"
    assert server.state.holder.unloaded and server_checkpoint(client) == title
    assert np.array_equal(generate(client)[0], image[0])


def test_switching_checkpoints_while_unloaded_loads_the_new_one(client, server):
    unload(client)
    try:
        assert client.post("/sdapi/v1/options", json={"sd_model_checkpoint": "other"}).status_code == 200
        assert server.state.holder.loaded and server_checkpoint(client).startswith("other.safetensors")
    finally:
        client.post("/sdapi/v1/options", json={"sd_model_checkpoint": "sd1.safetensors"})


def test_a_reload_that_fails_is_a_422_and_leaves_the_checkpoint_unloaded(client, server, models, image):
    unload(client)
    weights = (models / "sd1.safetensors").read_bytes()
    (models / "sd1.safetensors").write_bytes(weights[: len(weights) // 2])  # damaged while unloaded
    try:
        response = client.post("/sdapi/v1/reload-checkpoint")
        assert response.status_code == 422, response.text
        detail = response.json()["detail"]  # the file changed, so its title has no known hash any more
        assert detail.startswith("Could not load checkpoint 'sd1.safetensors' again: safetensors file ")
        assert detail.endswith("the file is truncated. Re-download or re-export it; it stays unloaded.")
        assert server.state.holder.unloaded and server_checkpoint(client) == "sd1.safetensors"
        response = client.post("/sdapi/v1/txt2img", json=SMALL)  # a generation's own reload fails alike
        assert response.status_code == 422 and response.json()["detail"].startswith(
            "Could not load the unloaded checkpoint 'sd1.safetensors' again: safetensors file ")
        assert server.state.holder.unloaded
    finally:
        (models / "sd1.safetensors").write_bytes(weights)
    assert client.post("/sdapi/v1/reload-checkpoint").status_code == 200
    assert np.array_equal(generate(client)[0], image[0])
