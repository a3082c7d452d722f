"""Loopback's "Append interrogated prompt: DeepBooru" on a server with `--deepdanbooru-models-path`
(webui/api_selectable_scripts.py `script_context`, webui/interrogation.py `deepbooru_now`): each loop's prompt is the
call's prompt, ", " and the server's DeepBooru tags of that loop's init image, under Settings > Interrogate as they
are when the loop runs (A1111 reads its options at each tagging).

Oracle: a crafted tagger whose score for each tag is exactly sigmoid(its logit) on every image."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from mixkit.testing.tiny_deepbooru import crafted_deepbooru_state, save_deepbooru
from pipelines.infotext import parse_infotext
from webui.base64_images import encode_png_base64

PICTURE = Image.fromarray(np.random.default_rng(3).integers(0, 255, (64, 64, 3), dtype=np.uint8))
TINY = {"prompt": "a red cat", "steps": 2, "seed": 3, "sampler_name": "Euler", "width": 64, "height": 64,
        "denoising_strength": 0.75, "init_images": [encode_png_base64(PICTURE)], "script_name": "Loopback"}
TAGS = ["solo", "1girl", "hat_(object)", "long_hair"]
LOGITS = [2.0, 3.0, -1.0, 0.5]  # scores 0.881, 0.953, 0.269, 0.622


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    folder = tmp_path_factory.mktemp("torch_deepdanbooru")
    save_deepbooru(folder / "model-resnet_custom_v3.pt", crafted_deepbooru_state(LOGITS), TAGS)
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path_factory.mktemp("out")), ui=False,
                          deepdanbooru_models_path=str(folder))
    with serving(config) as running:
        yield running


def loop_prompts(client, script_args) -> list[str]:
    response = client.post("/sdapi/v1/img2img", json={**TINY, "script_args": script_args})
    assert response.status_code == 200, response.text
    info = json.loads(response.json()["info"])
    return [parse_infotext(text)["Prompt"] for text in info["infotexts"][info["index_of_first_image"]:]]


def test_each_loop_appends_the_servers_deepbooru_tags(client):
    assert loop_prompts(client, [2, 0.5, "Linear", "DeepBooru"]) == ["a red cat, 1girl, long hair, solo"] * 2


def test_the_deepbooru_options_shape_the_tags(client):
    changed = {"interrogate_deepbooru_score_threshold": 0.25, "deepbooru_sort_alpha": False,
               "deepbooru_use_spaces": False, "deepbooru_filter_tags": "solo"}
    assert client.post("/sdapi/v1/options", json=changed).status_code == 200
    try:
        assert loop_prompts(client, [1, 0.5, "Linear", "deepbooru"]) == [
            "a red cat, 1girl, long_hair, hat_\\(object\\)"]
    finally:
        client.post("/sdapi/v1/options", json={"interrogate_deepbooru_score_threshold": 0.5,
                                               "deepbooru_sort_alpha": True, "deepbooru_use_spaces": True,
                                               "deepbooru_filter_tags": ""})


def test_a_removed_tagger_file_fails_the_job_naming_the_folder(client, server):
    import os

    folder = server.state.deepbooru.folder
    path = folder / "model-resnet_custom_v3.pt"
    os.rename(path, folder / "moved.bin")
    try:
        response = client.post("/sdapi/v1/img2img", json={**TINY, "script_args": [1, 0.5, "Linear", "DeepBooru"]})
        assert response.status_code == 422 and "No DeepDanbooru model in" in response.text, response.text
    finally:
        os.rename(folder / "moved.bin", path)


def test_the_loops_load_the_tagger_once_and_drop_it_after_the_job(client, server, monkeypatch):
    """interrogate_keep_models_in_memory off (A1111's default): three loops tag three init images with one load of the
    tagger (it used to be read again at every loop); the job's end drops it."""
    from mixkit.interrogate import deepbooru

    assert server.state.options.get("interrogate_keep_models_in_memory") is False
    loads, real = [], deepbooru.load_deepbooru
    monkeypatch.setattr(deepbooru, "load_deepbooru", lambda path, **kwargs: loads.append(path) or real(path, **kwargs))
    assert loop_prompts(client, [3, 0.5, "Linear", "DeepBooru"]) == ["a red cat, 1girl, long hair, solo"] * 3
    assert len(loads) == 1 and server.state.deepbooru._loaded is None
