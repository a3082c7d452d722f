"""Restore faces over A1111's HTTP API: txt2img's `restore_faces` (and the Settings it falls back on, override_settings
and a pasted infotext), Extras' GFPGAN / CodeFormer fields, `/sdapi/v1/face-restorers` and the folder flags. The
restorer networks are stand-ins filling the planted face with magenta (`mixkit.testing.tiny_face_restoration`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from mixkit.testing.tiny_face_restoration import a1111_face_folders, template_landmarks
from tests.pipelines.face_stand_ins import registered_stand_ins
from webui.base64_images import encode_png_base64

from .png_payloads import decode_png

SMALL = {"prompt": "a face", "steps": 2, "width": 64, "height": 64, "seed": 5}
FACE = ((8.0, 8.0, 56.0, 56.0), template_landmarks(8.0, 8.0, 48.0))
MAGENTA = [255, 0, 255]


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("faces")
    folders = a1111_face_folders(root / "models")
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False,
                          gfpgan_models_path=str(folders["GFPGAN"]), codeformer_models_path=str(folders["CodeFormer"]))
    with serving(config) as running:
        yield running


@pytest.fixture
def stand_ins(tmp_path):
    with registered_stand_ins(tmp_path / "models", [FACE], 64, 64) as registered:
        yield registered


def txt2img(client, **body):
    response = client.post("/sdapi/v1/txt2img", json={**SMALL, **body})
    assert response.status_code == 200, response.text
    payload = response.json()
    return decode_png(payload["images"][0]), json.loads(payload["info"])


def test_the_server_registers_and_lists_its_restorer_folders(client, server):
    listed = client.get("/sdapi/v1/face-restorers").json()
    assert [item["name"] for item in listed] == ["CodeFormer", "GFPGAN"]
    assert listed[0]["cmd_dir"].endswith("Codeformer") and listed[1]["cmd_dir"].endswith("GFPGAN")
    flags = client.get("/sdapi/v1/cmd-flags").json()
    assert flags["codeformer_models_path"].endswith("Codeformer") and flags["gfpgan_models_path"].endswith("GFPGAN")


def test_restore_faces_over_http(client, stand_ins):
    image, info = txt2img(client, restore_faces=True)
    assert np.asarray(image.convert("RGB"))[32, 32].tolist() == MAGENTA
    assert info["restore_faces"] is True and info["face_restoration_model"] == "CodeFormer"
    assert "Face restoration: CodeFormer" in info["infotexts"][0]
    assert stand_ins.loaders["CodeFormer"].network.weights == [0.5]  # A1111's code_former_weight default


def test_override_settings_choose_the_restorer_and_weight(client, stand_ins):
    _, info = txt2img(client, restore_faces=True,
                      override_settings={"face_restoration_model": "GFPGAN", "code_former_weight": 0.3})
    assert "Face restoration: GFPGAN" in info["infotexts"][0]
    assert stand_ins.loaders["GFPGAN"].network.weights == [0.3]
    assert stand_ins.loaders["CodeFormer"].network.weights == []


def test_a_request_without_restore_faces_takes_the_setting(client, stand_ins):
    assert client.post("/sdapi/v1/options", json={"face_restoration": True}).status_code == 200
    try:
        _, info = txt2img(client)
        assert info["restore_faces"] is True
        _, info = txt2img(client, restore_faces=False)  # the request's own value wins
        assert info["restore_faces"] is False and "Face restoration" not in info["infotexts"][0]
    finally:
        client.post("/sdapi/v1/options", json={"face_restoration": False})
    assert client.get("/sdapi/v1/options").json()["code_former_weight"] == 0.5


def test_a_pasted_infotext_turns_restoration_on_with_its_model(client, stand_ins):
    image, _ = txt2img(client, restore_faces=True, override_settings={"face_restoration_model": "GFPGAN"})
    _, info = txt2img(client, infotext=image.info["parameters"])
    assert info["restore_faces"] is True and "Face restoration: GFPGAN" in info["infotexts"][0]


@pytest.mark.parametrize("body, fragment", [
    ({"override_settings": {"code_former_weight": 2}}, "code_former_weight must be a number in [0, 1]"),
    ({"override_settings": {"face_restoration_model": "RestoreFormer"}}, "'RestoreFormer' is not available"),
])
def test_bad_face_settings_are_422_naming_them(client, stand_ins, body, fragment):
    response = client.post("/sdapi/v1/txt2img", json={**SMALL, "restore_faces": True, **body})
    assert response.status_code == 422 and fragment in response.text, response.text


def test_an_unknown_restorer_setting_is_refused(client):
    response = client.post("/sdapi/v1/options", json={"face_restoration_model": "Nonsense"})
    assert response.status_code == 422 and "face_restoration_model must be one of" in response.text


def test_missing_weights_are_422_naming_the_download(client, server, tmp_path):
    from pipelines.face_restoration import FACE_RESTORERS, register_face_restorers

    empty = tmp_path / "Codeformer"
    empty.mkdir()
    register_face_restorers(codeformer_folder=empty)
    try:
        response = client.post("/sdapi/v1/txt2img", json={**SMALL, "restore_faces": True})
        assert response.status_code == 422, response.text
        assert "codeformer-v0.1.0.pth" in response.text and "github.com/sczhou/CodeFormer" in response.text
    finally:
        FACE_RESTORERS.unregister("CodeFormer")


def face_picture() -> Image.Image:
    return Image.fromarray(np.random.default_rng(1).integers(0, 255, (64, 64, 3), dtype=np.uint8))


def extras(client, **body):
    response = client.post("/sdapi/v1/extra-single-image", json={"image": encode_png_base64(face_picture()), **body})
    assert response.status_code == 200, response.text
    payload = response.json()
    return decode_png(payload["image"]), payload["html_info"]


def test_extras_codeformer_without_an_upscaler(client, stand_ins):
    image, html = extras(client, codeformer_visibility=1.0, codeformer_weight=0.4)
    assert np.asarray(image.convert("RGB"))[32, 32].tolist() == MAGENTA
    assert image.info["postprocessing"] == "CodeFormer visibility: 1.0, CodeFormer weight: 0.4"
    assert "CodeFormer weight: 0.4" in html
    assert stand_ins.loaders["CodeFormer"].network.weights == [0.4]


def test_extras_gfpgan_is_blended_by_its_visibility_after_the_upscale(client, stand_ins):
    source = face_picture()
    image, _ = extras(client, upscaler_1="Nearest", upscaling_resize=1, gfpgan_visibility=0.5)
    restored_pixel = np.asarray(Image.blend(source, Image.new("RGB", (64, 64), tuple(MAGENTA)), 0.5))[32, 32]
    assert np.asarray(image.convert("RGB"))[32, 32].tolist() == restored_pixel.tolist()
    assert image.info["postprocessing"] == ("Postprocess upscale by: 1.0, Postprocess upscaler: Nearest, "
                                            "GFPGAN visibility: 0.5")


@pytest.mark.parametrize("body, fragment", [
    ({"codeformer_visibility": 1.5}, "codeformer_visibility must be a number in [0, 1]"),
    ({"gfpgan_visibility": 0.5, "codeformer_weight": -1}, "codeformer_weight must be a number in [0, 1]"),
])
def test_extras_face_fields_out_of_range_are_422(client, stand_ins, body, fragment):
    response = client.post("/sdapi/v1/extra-single-image", json={"image": encode_png_base64(face_picture()), **body})
    assert response.status_code == 422 and fragment in response.text, response.text


@pytest.mark.parametrize("path, body", [
    ("/sdapi/v1/extra-single-image", {"codeformer_visibility": 0.5}),
    ("/sdapi/v1/extra-batch-images", {"gfpgan_visibility": 1.0})])
def test_extras_with_a_restorer_file_that_does_not_load_is_a_422_naming_it(client, server, path, body):
    # the server's folders hold placeholder bytes, not weights: the restorer fails inside the job, as txt2img's does
    from pipelines.face_restoration import FACE_RESTORERS, register_face_restorers

    flags = client.get("/sdapi/v1/cmd-flags").json()
    names = register_face_restorers(gfpgan_folder=flags["gfpgan_models_path"],
                                    codeformer_folder=flags["codeformer_models_path"])  # as the server registered them
    picture = encode_png_base64(Image.new("RGB", (16, 16), (90, 60, 40)))
    images = {"image": picture} if path.endswith("single-image") else {"imageList": [{"data": picture, "name": "a"}]}
    try:
        response = client.post(path, json={**images, **body})
    finally:
        for name in names:
            FACE_RESTORERS.unregister(name)
    assert response.status_code == 422, response.text
    assert "is not a recognised checkpoint" in response.json()["detail"]
    assert client.get("/sdapi/v1/face-restorers").status_code == 200  # the connection and the server live on
