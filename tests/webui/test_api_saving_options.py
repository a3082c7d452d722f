"""enable_pnginfo and save_txt over the API (webui/api.py): /sdapi/v1/options and override_settings decide whether
the saved and returned PNGs carry the `parameters` chunk and whether a `.txt` is written beside each saved image and
grid; the response's `info` keeps the infotexts either way, as A1111's."""

from __future__ import annotations

import base64
import io
import json

import pytest
from PIL import Image

SMALL = {"steps": 1, "width": 64, "height": 64, "sampler_name": "Euler", "cfg_scale": 5.0}


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("api-saving")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False)) as running:
        yield running


def listing(folder) -> set[str]:
    return {path.name for path in folder.iterdir()} if folder.exists() else set()


def returned_images(body: dict) -> list[Image.Image]:
    return [Image.open(io.BytesIO(base64.b64decode(data))) for data in body["images"]]


def test_options_report_a1111s_defaults_and_refuse_a_non_bool(client):
    options = client.get("/sdapi/v1/options").json()
    assert (options["enable_pnginfo"], options["save_txt"]) == (True, False)
    refused = client.post("/sdapi/v1/options", json={"save_txt": "yes"})
    assert refused.status_code == 422 and "save_txt must be true or false, got 'yes'" in refused.text


def test_enable_pnginfo_off_leaves_the_chunk_out_of_saved_returned_and_grid_pngs_but_not_info(client, server):
    out = server.state.output_dir
    before = listing(out)
    assert client.post("/sdapi/v1/options", json={"enable_pnginfo": False}).status_code == 200
    try:
        body = client.post("/sdapi/v1/txt2img", json={"prompt": "quiet", "seed": 4, "batch_size": 2,
                                                      "save_images": True, **SMALL}).json()
    finally:
        client.post("/sdapi/v1/options", json={"enable_pnginfo": True})
    info = json.loads(body["info"])
    assert len(info["infotexts"]) == 3 and info["infotexts"][1].startswith("quiet\n")  # grid first, then two
    images = returned_images(body)
    assert len(images) == 3 and all("parameters" not in image.info for image in images)
    new = sorted(listing(out) - before)
    assert len(new) == 3 and all(name.endswith(".png") for name in new)  # 2 samples + the grid, no .txt
    for name in new:
        with Image.open(out / name) as saved:
            assert "parameters" not in saved.info
    with_chunk = client.post("/sdapi/v1/txt2img", json={"prompt": "loud", "seed": 4, **SMALL}).json()
    assert returned_images(with_chunk)[0].info["parameters"] == json.loads(with_chunk["info"])["infotexts"][0]


def test_save_txt_writes_each_saved_images_and_the_grids_infotext_beside_it(client, server):
    out = server.state.output_dir
    before = listing(out)
    body = client.post("/sdapi/v1/txt2img", json={"prompt": "noted", "seed": 11, "batch_size": 2, "save_images": True,
                                                  "override_settings": {"save_txt": True}, **SMALL}).json()
    texts = json.loads(body["info"])["infotexts"]  # [grid (the first image's), first, second]
    new = listing(out) - before
    pngs = sorted(name for name in new if name.endswith(".png"))
    assert sorted(new) == sorted([*pngs, *(name[:-4] + ".txt" for name in pngs)]) and len(pngs) == 3
    grid = [name for name in pngs if name.startswith("grid-")]
    samples = sorted(name for name in pngs if not name.startswith("grid-"))
    assert [(out / name[:-4]).with_suffix(".txt").read_text(encoding="utf-8") for name in [*grid, *samples]] == \
        [text + "\n" for text in texts]
    for name in pngs:  # enable_pnginfo still on: the PNGs keep their chunk
        with Image.open(out / name) as saved:
            assert saved.info["parameters"] + "\n" == (out / name[:-4]).with_suffix(".txt").read_text(encoding="utf-8")
    assert server.state.options.get("save_txt") is False  # the override held for that request only
    before = listing(out)
    client.post("/sdapi/v1/txt2img", json={"prompt": "plain", "seed": 12, "save_images": True, **SMALL})
    assert [name for name in listing(out) - before if name.endswith(".txt")] == []


def test_override_enable_pnginfo_is_checked_and_applies_to_that_request_only(client, server):
    body = client.post("/sdapi/v1/txt2img", json={"prompt": "x", "seed": 2, **SMALL,
                                                  "override_settings": {"enable_pnginfo": False}}).json()
    assert "parameters" not in returned_images(body)[0].info
    assert json.loads(body["info"])["infotexts"][0].startswith("x\n")
    assert server.state.options.get("enable_pnginfo") is True
    refused = client.post("/sdapi/v1/txt2img", json={"prompt": "x", **SMALL,
                                                     "override_settings": {"enable_pnginfo": "off"}})
    assert refused.status_code == 422 and "enable_pnginfo must be true or false, got 'off'" in refused.json()["detail"]
