"""A1111's `GET /sdapi/v1/hypernetworks` over `--hypernetwork-dir`, and `<hypernet:...>` tags through the HTTP API:
applied, unknown names refused at submission (422) naming the close ones."""

from __future__ import annotations

import base64
import io

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from PIL import Image

from mixkit.testing.tiny_hypernetwork import write_a1111_hypernetwork
from webui.config import ServerConfig
from webui.server_state import ServerState

SMALL = dict(steps=2, width=64, height=64, seed=9, sampler_name="Euler")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("hypernetworks")
    write_a1111_hypernetwork(root / "anime.pt", widths=(32, 64))
    write_a1111_hypernetwork(root / "sub" / "ink.pt", widths=(32,), seed=1)
    (root / "style.safetensors").write_bytes(b"x")  # not a hypernetwork for A1111
    return root


def listing(state: ServerState) -> list:
    from webui.api_listings import build_listings_router

    app = FastAPI()
    app.include_router(build_listings_router(state))
    with TestClient(app) as client:
        response = client.get("/sdapi/v1/hypernetworks")
    assert response.status_code == 200, response.text
    return response.json()


def test_the_listing_has_a1111s_shape_and_follows_the_folder(tmp_path, folder):
    state = ServerState(ServerConfig(models=["unused"], output_dir=str(tmp_path / "out"), ui=False,
                                     hypernetwork_dir=str(folder)))
    try:
        assert listing(state) == [{"name": "anime", "path": str(folder / "anime.pt")},
                                  {"name": "ink", "path": str(folder / "sub" / "ink.pt")}]
        write_a1111_hypernetwork(folder / "late.pt", widths=(32,))
        assert [item["name"] for item in listing(state)] == ["anime", "late", "ink"]  # no refresh needed
    finally:
        (folder / "late.pt").unlink()
        state.close()


def test_without_a_folder_the_listing_is_empty(tmp_path):
    state = ServerState(ServerConfig(models=["unused"], output_dir=str(tmp_path / "out"), ui=False))
    try:
        assert listing(state) == []
    finally:
        state.close()


def test_a_missing_folder_is_refused_at_start(tmp_path):
    from webui.config import check_server_config

    with pytest.raises(ValueError, match="--hypernetwork-dir .* is not a folder"):
        check_server_config(ServerConfig(models=["unused"], hypernetwork_dir=str(tmp_path / "missing")))


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving, folder):
    root = tmp_path_factory.mktemp("api-hypernetworks")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False,
                              hypernetwork_dir=str(folder))) as running:
        yield running


def txt2img(client: httpx.Client, prompt: str) -> np.ndarray:
    response = client.post("/sdapi/v1/txt2img", json={"prompt": prompt, **SMALL})
    assert response.status_code == 200, response.text
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(response.json()["images"][0]))))


def test_the_tag_is_applied_through_the_api(client):
    plain = txt2img(client, "a red circle")
    tagged = txt2img(client, "a red circle<hypernet:anime:0.8>")
    assert not np.array_equal(plain, tagged)
    assert np.array_equal(txt2img(client, "a red circle<hypernet:anime:0>"), plain)
    assert client.get("/sdapi/v1/cmd-flags").json()["hypernetwork_dir"] is not None


@pytest.mark.parametrize("prompt, message", [
    ("a <hypernet:anim:1>", "Did you mean anime?"),
    ("a <hypernet:anime:strong>", "strength must be a number"),
    ("a <hypernet:../anime:1>", "not found"),
])
def test_bad_tags_are_refused_at_submission(client, prompt, message):
    response = client.post("/sdapi/v1/txt2img", json={"prompt": prompt, **SMALL})
    assert response.status_code == 422 and message in response.text, response.text
