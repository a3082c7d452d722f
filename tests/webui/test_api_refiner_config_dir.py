"""`refiner_config_dir` in /sdapi/v1/txt2img and img2img (webui/refiner_config_folders.py): a client names a diffusers
folder among the server's checkpoints, never a path; the name becomes the folder's path for the Python API, whose
check decides whether it applies (its message naming the folder as the request did)."""

from __future__ import annotations

import json
import shutil

import pytest

from webui.api_convert import refiner_values
from webui.checkpoints import CheckpointCatalog

from .png_payloads import decode_png

TINY = {"prompt": "a red fox", "negative_prompt": "blurry", "seed": 3, "steps": 4, "width": 64, "height": 64,
        "sampler_name": "Euler"}


@pytest.fixture
def catalog(tmp_path):
    """A models folder holding a refiner file, a diffusers folder and a config-only folder (configs, no weights)."""
    models = tmp_path / "models"
    (models / "xl-configs" / "unet").mkdir(parents=True)
    (models / "xl-configs" / "unet" / "config.json").write_text("{}")
    (models / "sub" / "full" / "unet").mkdir(parents=True)
    (models / "sub" / "full" / "model_index.json").write_text("{}")
    (models / "refiner.safetensors").write_bytes(b"weights")
    return CheckpointCatalog(models_dir=models)


@pytest.mark.parametrize("name, folder", [("xl-configs", "xl-configs"), ("sub/full", "sub/full"),
                                          ("sub_full", "sub/full")])  # its model_name, as A1111 aliases it
def test_a_config_folder_is_named_as_a_checkpoint_and_passed_on_as_its_path(catalog, name, folder):
    values = refiner_values("refiner", 0.6, catalog, name)
    assert values == {"refiner": str(catalog.models_dir / "refiner.safetensors"), "refiner_switch_at": 0.6,
                      "refiner_config_dir": str(catalog.models_dir / folder)}


@pytest.mark.parametrize("none", [None, "", "None", "none"])
def test_no_config_folder_spellings(catalog, none):
    assert "refiner_config_dir" not in refiner_values("refiner", None, catalog, none)


def test_without_a_refiner_the_folder_is_still_passed_on_for_the_pipelines_check(catalog):
    assert refiner_values("None", None, catalog, "xl-configs") == {
        "refiner_config_dir": str(catalog.models_dir / "xl-configs")}


@pytest.mark.parametrize("name, message", [
    ("refiner", "refiner_config_dir='refiner' is the checkpoint 'refiner.safetensors', not a diffusers folder: name "
                "the diffusers folder among this server's checkpoints whose configs describe the refiner file "
                "(sub/full, xl-configs)."),
    ("nope", "refiner_config_dir='nope': Unknown checkpoint 'nope'; available: "),
])
def test_a_name_that_is_no_diffusers_folder_of_the_server_is_refused(catalog, name, message):
    with pytest.raises(ValueError) as caught:
        refiner_values("refiner", None, catalog, name)
    assert str(caught.value).startswith(message)


def test_a_path_is_never_taken_even_of_a_folder_in_the_models_dir(catalog, tiny_sd1_dir):
    for path in (str(tiny_sd1_dir), str(catalog.models_dir / "xl-configs"), "../xl-configs", "/etc"):
        with pytest.raises(ValueError, match="Unknown checkpoint"):
            refiner_values("refiner", None, catalog, path)
    with pytest.raises(ValueError, match="no checkpoint list"):
        refiner_values(None, None, None, "xl-configs")


def _pixels(payload: str) -> bytes:
    """An image's pixels (its PNG also holds the infotext, which names the refiner's own file and hash)."""
    return decode_png(payload).convert("RGB").tobytes()


@pytest.fixture(scope="module")
def config_dir_server(tiny_sd1_dir, tmp_path_factory, serving):
    """The tiny SD1 model, and in the models folder a refiner of its architecture (other weights) as a diffusers
    folder `refiner` and as the single file `refiner.safetensors`, which loads only with that folder's configs, and
    `refiner-configs`, the folder's configs without its weights."""
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint
    from mixkit.testing.tiny_models import build_tiny_sd1
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("api-refiner-config-dir")
    models = root / "models"
    build_tiny_sd1(models / "refiner", seed=1)
    save_ldm_checkpoint(load_diffusion_model(models / "refiner"), models / "refiner.safetensors")
    shutil.copytree(models / "refiner", models / "refiner-configs",
                    ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    base = shutil.copytree(tiny_sd1_dir, root / "base")
    config = ServerConfig(models=[str(base)], models_dir=str(models), output_dir=str(root / "outputs"), ui=False)
    with serving(config) as running:
        yield running


def test_a_single_file_refiner_with_its_config_folder_refines_as_the_folder_over_http(config_dir_server):
    import httpx

    with httpx.Client(base_url=config_dir_server.url, timeout=120) as http:
        folder = http.post("/sdapi/v1/txt2img", json={**TINY, "refiner_checkpoint": "refiner",
                                                      "refiner_switch_at": 0.5})
        single_file = http.post("/sdapi/v1/txt2img", json={**TINY, "refiner_checkpoint": "refiner.safetensors",
                                                           "refiner_switch_at": 0.5, "refiner_config_dir": "refiner"})
        plain = http.post("/sdapi/v1/txt2img", json=TINY)
        without = http.post("/sdapi/v1/txt2img", json={**TINY, "refiner_checkpoint": "refiner.safetensors",
                                                       "refiner_switch_at": 0.5})
    assert folder.status_code == single_file.status_code == 200, single_file.text
    pixels = {name: _pixels(response.json()["images"][0])
              for name, response in (("folder", folder), ("file", single_file), ("plain", plain))}
    assert pixels["file"] == pixels["folder"] != pixels["plain"]
    assert single_file.json()["parameters"]["refiner_config_dir"] == "refiner"  # echoed as sent
    assert "Refiner: refiner [" in json.loads(single_file.json()["info"])["infotexts"][0]
    # the control: without its configs the tiny file fits the shipped SD 1.5 ones no better than before; the advice
    # is in request terms (a folder among the server's checkpoints), not the Python API's or the CLI's
    detail = without.json()["detail"]
    assert without.status_code == 422 and detail.startswith("refiner.safetensors does not match the 'sd15' configs: ")
    assert detail.endswith(
        "The refiner is a single file, read with the shipped configs of its family. If it is complete, it has another "
        "architecture: name the diffusers folder whose configs match it in the request's refiner_config_dir (the web "
        "UI's Refiner > Config folder), a diffusers folder among this server's models (GET "
        "/mixkit/v1/refiner-config-folders; this server's are: base, refiner, refiner-configs), or pick that diffusers "
        "folder as the refiner itself."), detail
    assert "FOLDER" not in detail and "--refiner-config-dir" not in detail and "from_pretrained" not in detail


@pytest.mark.parametrize("fields, status, message", [
    ({"refiner_config_dir": "refiner"}, 422,
     "refiner_config_dir='refiner' sets the configs of a single-file refiner, and no refiner is given: add the refiner "
     "checkpoint, or drop refiner_config_dir."),
    ({"refiner_checkpoint": "refiner", "refiner_config_dir": "refiner"}, 422,
     "refiner_config_dir='refiner' applies to a single-file refiner; the refiner "),
    ({"refiner_checkpoint": "refiner.safetensors", "refiner_config_dir": "refiner.safetensors"}, 422,
     "refiner_config_dir='refiner.safetensors' is the checkpoint 'refiner.safetensors', not a diffusers folder"),
    ({"refiner_checkpoint": "refiner.safetensors", "refiner_config_dir": "/etc"}, 422,
     "refiner_config_dir='/etc': Unknown checkpoint '/etc'"),
])
def test_a_config_folder_that_cannot_apply_is_a_422_before_queueing(config_dir_server, fields, status, message):
    import httpx

    with httpx.Client(base_url=config_dir_server.url, timeout=120) as http:
        for kind in ("txt2img", "img2img"):
            body = {**TINY, **fields}
            if kind == "img2img":
                from PIL import Image

                from webui.base64_images import encode_png_base64

                body["init_images"] = [encode_png_base64(Image.new("RGB", (64, 64), "red"))]
            response = http.post(f"/sdapi/v1/{kind}", json=body)
            assert response.status_code == status and message in response.json()["detail"], response.text


def test_a_plots_refiner_axis_runs_none_folder_and_file_cells_with_the_requests_config_folder(config_dir_server):
    """A1111's Refiner checkpoint axis (X/Y/Z index of its txt2img list) with the request's refiner_config_dir: the
    None cell has no refiner, the folder cell its own configs, the file cell the request's folder."""
    import httpx

    from pipelines.infotext import parse_infotext

    args = ["Refiner checkpoint", "", ["None", "refiner", "refiner.safetensors"], "Nothing", "", [], "Nothing", "",
            [], False, True]
    with httpx.Client(base_url=config_dir_server.url, timeout=240) as http:
        response = http.post("/sdapi/v1/txt2img", json={
            **TINY, "script_name": "x/y/z plot", "script_args": args, "refiner_checkpoint": "refiner.safetensors",
            "refiner_switch_at": 0.5, "refiner_config_dir": "refiner"})
    assert response.status_code == 200, response.text
    none, folder, single_file = (_pixels(image) for image in response.json()["images"][1:])
    assert single_file == folder != none
    texts = [parse_infotext(text) for text in json.loads(response.json()["info"])["infotexts"][1:]]
    assert [text.get("Refiner", "").split(" [")[0] for text in texts] == ["", "refiner", "refiner"]


def test_a_config_only_folder_is_listed_and_used_only_as_a_config_folder(config_dir_server):
    """Not a checkpoint of /sdapi/v1/sd-models (nor a refiner_checkpoint or sd_model_checkpoint, refused before
    queueing saying what it is), but listed by /mixkit/v1/refiner-config-folders and read as a refiner's configs."""
    import httpx

    with httpx.Client(base_url=config_dir_server.url, timeout=120) as http:
        listed = http.get("/sdapi/v1/sd-models").json()
        folders = http.get("/mixkit/v1/refiner-config-folders").json()
        from_configs = http.post("/sdapi/v1/txt2img", json={
            **TINY, "refiner_checkpoint": "refiner.safetensors", "refiner_switch_at": 0.5,
            "refiner_config_dir": "refiner-configs"})
        from_folder = http.post("/sdapi/v1/txt2img", json={**TINY, "refiner_checkpoint": "refiner",
                                                           "refiner_switch_at": 0.5})
        as_refiner = http.post("/sdapi/v1/txt2img", json={**TINY, "refiner_checkpoint": "refiner-configs"})
        as_model = http.post("/sdapi/v1/txt2img", json={
            **TINY, "override_settings": {"sd_model_checkpoint": "refiner-configs"}})
    assert [item["model_name"] for item in listed] == ["base", "refiner", "refiner"]  # the folder and the file
    assert folders == [{"title": "base", "model_name": "base", "config_only": False},
                       {"title": "refiner", "model_name": "refiner", "config_only": False},
                       {"title": "refiner-configs", "model_name": "refiner-configs", "config_only": True}]
    assert from_configs.status_code == from_folder.status_code == 200, from_configs.text
    assert _pixels(from_configs.json()["images"][0]) == _pixels(from_folder.json()["images"][0])
    refused = ("'refiner-configs' is the folder 'refiner-configs', which holds configs only (no weights): it is no "
               "checkpoint, only a refiner's config folder")
    assert as_refiner.status_code == 422 and as_refiner.json()["detail"].startswith(
        "refiner_checkpoint='refiner-configs': " + refused), as_refiner.text
    assert as_model.status_code in (400, 404, 422) and refused in as_model.text, as_model.text
