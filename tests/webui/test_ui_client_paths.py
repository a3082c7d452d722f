"""A client cannot make the UI read a file of the server's by naming its path in an Image/File input.

Gradio takes an input's `{"path": ...}` only from its own upload folder, but only on an app whose `has_launched` is
set, which `mount_gradio_app` leaves unset (webui.server sets it). Unset, PNG Info read any PNG on the disk and
Extras upscaled and served any image, and the error told whether a path existed.
"""

from __future__ import annotations

import json

import httpx
import pytest
from PIL import Image, PngImagePlugin

SECRET = "TOP SECRET infotext"
FILE_COMPONENTS = ("Image", "File", "Gallery", "ImageEditor", "ImageMask", "Sketchpad")


@pytest.fixture(scope="module")
def ui_server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("client-paths")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"))) as running:
        yield running


@pytest.fixture(scope="module")
def secret_png(tmp_path_factory):
    path = tmp_path_factory.mktemp("private") / "secret.png"
    info = PngImagePlugin.PngInfo()
    info.add_text("parameters", SECRET)
    Image.new("RGB", (16, 16), "red").save(path, pnginfo=info)
    return path


def file_endpoints(url: str) -> dict[str, list[dict]]:
    """Every named endpoint that has an image or file input, with its parameters."""
    info = httpx.get(url + "/gradio_api/info", timeout=60).json()["named_endpoints"]
    return {name: endpoint["parameters"] for name, endpoint in info.items()
            if any(parameter.get("component") in FILE_COMPONENTS for parameter in endpoint["parameters"])}


def as_file_data(path, component: str):
    data = {"path": str(path), "meta": {"_type": "gradio.FileData"}}
    if component == "Gallery":
        return [{"image": data, "caption": None}]
    if component in ("ImageEditor", "ImageMask", "Sketchpad"):
        return {"background": data, "layers": [], "composite": data}
    return data


def call(url: str, name: str, data: list) -> str:
    event = httpx.post(f"{url}/gradio_api/call{name}", json={"data": data}, timeout=60)
    assert event.status_code == 200, event.text
    return httpx.get(f"{url}/gradio_api/call{name}/{event.json()['event_id']}", timeout=120).text


def test_the_ui_has_file_inputs_to_attack(ui_server):
    names = file_endpoints(ui_server.url)
    assert "/read" in names and "/upscale" in names  # PNG Info and Extras, the two that leaked


def test_no_file_input_takes_a_path_outside_the_upload_folder(ui_server, secret_png):
    output_dir = ui_server.state.output_dir
    before = sorted(output_dir.rglob("*")) if output_dir.exists() else []
    leaked = {}
    for name, parameters in file_endpoints(ui_server.url).items():
        data = [as_file_data(secret_png, p["component"]) if p.get("component") in FILE_COMPONENTS
                else p.get("parameter_default") for p in parameters]
        answer = call(ui_server.url, name, data)
        if SECRET in answer or "event: error" not in answer:
            leaked[name] = answer[:300]
    assert leaked == {}, json.dumps(leaked, indent=1)
    assert (sorted(output_dir.rglob("*")) if output_dir.exists() else []) == before


def test_a_missing_path_and_a_present_one_get_the_same_answer(ui_server, secret_png):
    """No existence oracle: a path that exists and one that does not are refused alike."""
    absent = secret_png.with_name("absent.png")
    present = call(ui_server.url, "/read", [as_file_data(secret_png, "Image")])
    missing = call(ui_server.url, "/read", [as_file_data(absent, "Image")])
    assert "event: error" in present
    assert present.replace(str(secret_png), "X") == missing.replace(str(absent), "X")
