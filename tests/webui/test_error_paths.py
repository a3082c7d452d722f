"""Error bodies sent to HTTP clients name files relative to the configured folders, never the server's paths."""

from __future__ import annotations

import json
import os

import httpx
import pytest

from webui.error_paths import PathRedactor


def test_a_path_inside_a_folder_becomes_relative_and_the_folder_its_option_name(tmp_path):
    models = tmp_path / "models"
    redact = PathRedactor({models: "<models_dir>"}, home="/home/alice")
    assert redact(f"'{models}/sub/x.safetensors' is not a recognised checkpoint") == \
        "'sub/x.safetensors' is not a recognised checkpoint"
    assert redact(f"no checkpoint in {models}.") == "no checkpoint in <models_dir>."
    assert redact(f"no checkpoint in {models}/") == "no checkpoint in <models_dir>/"
    # another folder whose name starts the same is not this one
    assert redact(f"read {models}2/x.ckpt") == f"read {models}2/x.ckpt"
    assert redact(f"see {models}.bak") == f"see {models}.bak"


def test_every_upscaler_models_folder_is_redacted_to_its_option_name(tmp_path):
    from types import SimpleNamespace

    from webui.config import UPSCALER_FOLDER_FLAGS, ServerConfig
    from webui.error_paths import server_path_redactor

    folders = {attribute: str(tmp_path / attribute) for attribute in UPSCALER_FOLDER_FLAGS}
    assert set(folders) == {"esrgan_models_path", "realesrgan_models_path", "swinir_models_path", "dat_models_path",
                            "scunet_models_path"}
    state = SimpleNamespace(config=ServerConfig(models=["m"], **folders), output_dir=str(tmp_path / "out"))
    redact = server_path_redactor(state)
    for attribute, folder in folders.items():
        assert redact(f"cannot read {folder}.") == f"cannot read <{attribute}>."


def test_the_interrogate_word_lists_and_clip_model_are_redacted(tmp_path):
    from types import SimpleNamespace

    from webui.config import ServerConfig
    from webui.error_paths import server_path_redactor

    lists, clip = tmp_path / "interrogate", tmp_path / "clips" / "my-clip"
    state = SimpleNamespace(config=ServerConfig(models=["m"], interrogate_categories_dir=str(lists),
                                                interrogate_clip_model=str(clip)), output_dir=str(tmp_path / "out"))
    redact = server_path_redactor(state)
    assert redact(f"empty list {lists / 'flavors.txt'}") == "empty list flavors.txt"
    assert redact(f"cannot load {clip}: broken") == "cannot load my-clip: broken"


def test_the_deepdanbooru_folder_is_redacted_to_its_option_name(tmp_path):
    from types import SimpleNamespace

    from webui.config import ServerConfig
    from webui.error_paths import server_path_redactor

    folder = tmp_path / "torch_deepdanbooru"
    state = SimpleNamespace(config=ServerConfig(models=["m"], deepdanbooru_models_path=str(folder)),
                            output_dir=str(tmp_path / "out"))
    assert server_path_redactor(state)(f"No DeepDanbooru model in '{folder}': download") == \
        "No DeepDanbooru model in '<deepdanbooru_models_path>': download"


def test_a_file_becomes_its_name_and_the_longest_configured_path_wins(tmp_path):
    models = tmp_path / "models"
    redact = PathRedactor({models: "<models_dir>", models / "sd1.safetensors": "sd1.safetensors",
                           tmp_path / "styles.csv": "styles.csv"}, home="/nowhere")
    assert redact(f"unknown style(s) ['x'] in {tmp_path / 'styles.csv'}; known") == "unknown style(s) ['x'] in styles.csv; known"
    assert redact(f"'{models / 'sd1.safetensors'}' failed") == "'sd1.safetensors' failed"


def test_the_home_directory_and_symlinked_spellings_are_hidden_too(tmp_path):
    real = tmp_path / "real-models"
    real.mkdir()
    link = tmp_path / "models"
    os.symlink(real, link)
    redact = PathRedactor({link: "<models_dir>"}, home=tmp_path / "home" / "bob")
    assert redact(f"'{real}/x.ckpt' is corrupt") == "'x.ckpt' is corrupt"  # a loader that resolved the link
    assert redact(f"cache at {tmp_path}/home/bob/.cache/hub: full") == "cache at ~/.cache/hub: full"
    assert redact(f"home is {tmp_path}/home/bob") == "home is ~"
    assert redact(f"{tmp_path}/home/bobby") == f"{tmp_path}/home/bobby"
    assert redact(["a list", "is left"]) == ["a list", "is left"]  # FastAPI's validation details echo the request only


@pytest.fixture(scope="module")
def leaky_server(tiny_sd1_dir, single_file_checkpoints, tmp_path_factory, serving):
    """A server on single files (one broken) with a styles file, all below one root."""
    from webui.config import ServerConfig
    from webui.model_switch import ModelHolder
    from webui.server_state import ServerState

    root = tmp_path_factory.mktemp("error-paths")
    (root / "styles.csv").write_text('name,prompt,negative_prompt\n"s1","a {prompt}",""\n')
    state = ServerState(ServerConfig(models_dir=str(single_file_checkpoints), output_dir=str(root / "outputs"),
                                     ui=False, styles_file=str(root / "styles.csv")))
    state.holder = ModelHolder(state.catalog, pipeline_kwargs={"config_dir": str(tiny_sd1_dir),
                                                               "limits": state.config.limits})
    state.options.apply({"sd_model_checkpoint": "sd1.safetensors"})
    with serving(state) as running:
        yield running, root


SMALL = {"prompt": "a cube", "steps": 1, "width": 64, "height": 64}


@pytest.mark.parametrize("path, body, fragment", [
    ("/sdapi/v1/txt2img", {**SMALL, "override_settings": {"sd_model_checkpoint": "broken.safetensors"}},
     "'broken.safetensors' is not a recognised checkpoint"),
    ("/sdapi/v1/options", {"sd_model_checkpoint": "broken.safetensors"},
     "'broken.safetensors' is not a recognised checkpoint"),
    ("/sdapi/v1/txt2img", {**SMALL, "styles": ["nostyle"]}, "unknown style(s) ['nostyle'] in styles.csv"),
])
def test_error_bodies_name_files_relative_to_the_configured_folders(leaky_server, single_file_checkpoints, path, body,
                                                                    fragment):
    running, root = leaky_server
    with httpx.Client(base_url=running.url, timeout=120) as client:
        response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    assert fragment in response.json()["detail"] and fragment in response.json()["errors"]
    for server_path in (str(root), str(single_file_checkpoints), os.path.expanduser("~")):
        assert server_path not in response.text


def test_a_500_whose_message_holds_a_lone_surrogate_is_still_sent():
    """A request's "\\ud800" can end up in an unexpected exception's message; the 500 must still encode."""
    from webui.error_paths import server_error_response

    response = server_error_response(ValueError("no style \ud800"), "POST /sdapi/v1/txt2img", lambda text: text)
    assert response.status_code == 500
    assert json.loads(response.body)["detail"] == "no style \\ud800"
