"""LoRA card thumbnails: A1111's preview file names, placeholders, and a preview route that reads nothing outside the folder."""

from __future__ import annotations

import io
import os

import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from webui.lora_previews import PREVIEW_ROUTE, find_preview, load_thumbnail, placeholder_image, preview_for_name


def write_lora(path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({"lora_unet_x.lora_down.weight": torch.zeros(1, 1)}, str(path), metadata={"ss_base_model_version": "sd_v1"})


def write_image(path, color, size=(40, 30), fmt=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path, format=fmt, **({"lossless": True} if fmt == "WEBP" else {}))


@pytest.fixture()
def lora_folder(tmp_path):
    folder = tmp_path / "loras"
    write_lora(folder / "style.safetensors")
    write_image(folder / "style.preview.png", (255, 0, 0))
    write_image(folder / "style.png", (0, 255, 0))  # A1111 looks at NAME.png before NAME.preview.png
    write_lora(folder / "sub" / "detail.safetensors")
    write_image(folder / "sub" / "detail.preview.webp", (0, 0, 255), fmt="WEBP")
    write_lora(folder / "bare.safetensors")
    write_lora(folder / "escape.safetensors")
    write_image(tmp_path / "secret.png", (1, 2, 3))
    os.symlink(tmp_path / "secret.png", folder / "escape.png")  # points outside the folder: never used
    (folder / "broken.safetensors").write_bytes(b"x")
    (folder / "broken.jpg").write_bytes(b"not an image")
    return folder


def test_preview_file_names_follow_a1111_order(lora_folder):
    assert find_preview(lora_folder / "style.safetensors", lora_folder) == (lora_folder / "style.png").resolve()
    (lora_folder / "style.png").unlink()
    assert find_preview(lora_folder / "style.safetensors", lora_folder) == (lora_folder / "style.preview.png").resolve()
    assert find_preview(lora_folder / "sub" / "detail.safetensors", lora_folder).name == "detail.preview.webp"
    assert find_preview(lora_folder / "bare.safetensors", lora_folder) is None
    assert find_preview(lora_folder / "escape.safetensors", lora_folder) is None  # symlink out of the folder


def test_preview_lookup_is_by_exact_library_name(lora_folder):
    from mixkit.lora import LoraLibrary

    library = LoraLibrary(lora_folder)
    assert preview_for_name(library, "sub/detail").name == "detail.preview.webp"
    for name in ("detail", "../secret", str(lora_folder / "style"), "style.png", "", None, "escape"):
        assert preview_for_name(library, name) is None, name


def test_thumbnails_and_placeholders(lora_folder, tmp_path):
    thumb = load_thumbnail(lora_folder / "style.png", side=16)
    assert thumb.size == (16, 12) and thumb.getpixel((5, 5)) == (0, 255, 0)
    assert load_thumbnail(lora_folder / "broken.jpg") is None
    huge = tmp_path / "huge.png"
    Image.new("1", (5000, 5000)).save(huge)  # more pixels than a preview may have: refused, not decoded
    assert load_thumbnail(huge) is None
    face = placeholder_image("sub/detail", side=64)
    assert face.size == (64, 64) and len(set(face.getdata())) > 1  # the letter is drawn on the grey


def test_card_items_show_previews_or_placeholders(lora_folder):
    from mixkit.lora import LoraLibrary
    from webui.ui.lora_tab import card_items

    items, names = card_items(LoraLibrary(lora_folder))
    # A card inserts the name A1111 resolves: the file stem when it is unique (`detail`), not `sub/detail`.
    assert names == ["bare", "broken", "escape", "style", "detail"]
    colors = {name: image.getpixel((2, 2)) for name, (image, _caption) in zip(names, items)}
    assert colors["style"] == (0, 255, 0) and colors["detail"] == (0, 0, 255)
    grey = placeholder_image("x").getpixel((2, 2))
    assert colors["bare"] == colors["escape"] == colors["broken"] == grey
    assert items[names.index("style")][1].startswith("style | sd_v1")


@pytest.fixture()
def api(lora_folder, tmp_path):
    from starlette.testclient import TestClient

    from webui.config import ServerConfig
    from webui.server import build_app
    from webui.server_state import ServerState

    (tmp_path / "models").mkdir()  # no model is needed to list LoRAs
    state = ServerState(ServerConfig(models_dir=str(tmp_path / "models"), output_dir=str(tmp_path / "out"), ui=False,
                                     lora_dir=str(lora_folder)))
    # a loopback Host, as a browser on this machine sends (webui.origin_guard refuses "testserver")
    with TestClient(build_app(state), base_url="http://localhost") as client:
        yield client
    state.close()


def test_preview_route_and_lora_list(api):
    listed = {item["name"]: item for item in api.get("/sdapi/v1/loras").json()}
    assert listed["style"]["preview"] == PREVIEW_ROUTE + "?name=style"
    assert listed["sub/detail"]["preview"] == PREVIEW_ROUTE + "?name=sub%2Fdetail"
    assert listed["bare"]["preview"] is None and listed["escape"]["preview"] is None
    response = api.get(listed["sub/detail"]["preview"])
    assert response.status_code == 200 and response.headers["content-type"] == "image/webp"
    assert Image.open(io.BytesIO(response.content)).getpixel((1, 1))[:3] == (0, 0, 255)


@pytest.mark.parametrize("name", ["../secret", "..%2Fsecret", "%2E%2E/secret", "/etc/passwd", "escape", "bare",
                                  "style.png", "sub/../../secret", "nope", ""])
def test_preview_route_reads_nothing_outside_the_folder(api, name):
    response = api.get(f"{PREVIEW_ROUTE}?name={name}")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json" and b"PNG" not in response.content
