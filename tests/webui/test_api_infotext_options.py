"""A1111's Settings > Infotext options over HTTP (webui/options.py, webui/api_convert.py): listed by GET
/sdapi/v1/options with A1111's defaults, set by POST (and saved), taken per request from override_settings, and
honoured in the API's `info`, the returned PNGs' text and the saved files; `User` is the --auth user."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import httpx
import pytest
from PIL import Image

from pipelines.infotext import parse_infotext
from webui.options import ServerOptions

PASSWORD = "pw-for-tests"
REQUEST = {"prompt": "a lamp", "steps": 1, "width": 64, "height": 64, "sampler_name": "Euler", "seed": 3}
A1111_DEFAULTS = {"add_model_name_to_info": True, "add_model_hash_to_info": True, "add_vae_name_to_info": True,
                  "add_vae_hash_to_info": True, "add_user_name_to_info": False, "add_version_to_infotext": True,
                  "lora_add_hashes_to_infotext": True, "textual_inversion_add_hashes_to_infotext": True,
                  "lora_bundled_ti_to_infotext": True}


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    """An API server behind --auth (one user, alice), saving its settings to a file."""
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("infotext-options")
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False,
                          auth=("alice", PASSWORD), settings_file=str(root / "config.json"))
    with serving(config) as running:
        yield running


@pytest.fixture()
def client(server):
    with httpx.Client(base_url=server.url, timeout=120, auth=("alice", PASSWORD)) as http:
        yield http
        # each test starts from A1111's defaults
        assert http.post("/sdapi/v1/options", json=A1111_DEFAULTS).status_code == 200


def generate(client, **fields) -> tuple[dict, str]:
    """(the infotext's values from `info`, the returned PNG's `parameters` text), checked to agree."""
    response = client.post("/sdapi/v1/txt2img", json={**REQUEST, **fields})
    assert response.status_code == 200, response.text
    infotext = json.loads(response.json()["info"])["infotexts"][0]
    png = Image.open(io.BytesIO(base64.b64decode(response.json()["images"][0])))
    assert png.info["parameters"] == infotext
    return parse_infotext(infotext), infotext


def test_options_list_a1111s_defaults(client):
    options = client.get("/sdapi/v1/options").json()
    assert {key: options[key] for key in A1111_DEFAULTS} == A1111_DEFAULTS


def test_settings_leave_the_keys_out_of_info_png_and_saved_files(client, server):
    written, _ = generate(client)
    assert {"Model", "Model hash", "Version"} <= set(written) and "User" not in written
    changes = {"add_model_name_to_info": False, "add_model_hash_to_info": False, "add_version_to_infotext": False}
    assert client.post("/sdapi/v1/options", json=changes).status_code == 200
    assert {key: client.get("/sdapi/v1/options").json()[key] for key in changes} == changes
    private, text = generate(client, save_images=True)
    assert not {"Model", "Model hash", "Version"} & set(private)
    assert {k: v for k, v in written.items() if k not in ("Model", "Model hash", "Version")} == private
    saved = sorted(Path(server.state.output_dir).rglob("*.png"), key=lambda path: path.stat().st_mtime)[-1]
    assert Image.open(saved).info["parameters"] == text
    saved_settings = json.loads(Path(server.state.config.settings_file).read_text())
    assert {key: saved_settings[key] for key in changes} == changes  # kept across a restart


def test_the_authenticated_user_is_written_when_asked_for(client):
    assert client.post("/sdapi/v1/options", json={"add_user_name_to_info": True}).status_code == 200
    _, text = generate(client)
    assert text.endswith(", User: alice")


def test_override_settings_apply_to_one_request(client):
    written, _ = generate(client, override_settings={"add_version_to_infotext": False, "add_user_name_to_info": True})
    assert "Version" not in written and written["User"] == "alice"
    after, _ = generate(client)
    assert "Version" in after and "User" not in after  # restored afterwards, A1111's default


@pytest.mark.parametrize("where", ["options", "override_settings"])
def test_a_value_that_is_not_a_boolean_is_refused_naming_the_key(client, where):
    if where == "options":
        response = client.post("/sdapi/v1/options", json={"lora_add_hashes_to_infotext": "no"})
    else:
        response = client.post("/sdapi/v1/txt2img",
                               json={**REQUEST, "override_settings": {"lora_add_hashes_to_infotext": "no"}})
    assert response.status_code == 422
    assert "lora_add_hashes_to_infotext must be true or false, got 'no'" in response.text


def test_a_settings_file_value_is_read_back_and_checked(tmp_path):
    path = tmp_path / "config.json"
    options = ServerOptions(str(tmp_path), 0, settings_file=str(path))
    options.apply(options.check_update({"add_vae_hash_to_info": False}))
    assert ServerOptions(str(tmp_path), 0, settings_file=str(path)).infotext_options().add_vae_hash_to_info is False
    path.write_text(json.dumps({"add_vae_hash_to_info": "off"}))
    with pytest.raises(ValueError, match="key 'add_vae_hash_to_info': add_vae_hash_to_info must be true or false"):
        ServerOptions(str(tmp_path), 0, settings_file=str(path))
