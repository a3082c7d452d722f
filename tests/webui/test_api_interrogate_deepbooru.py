"""A1111's `POST /sdapi/v1/interrogate` with model "deepdanbooru": the image's DeepBooru tags, under the deepbooru
options of /sdapi/v1/options, from the `--deepdanbooru-models-path` folder.

Oracle: a crafted tagger file whose score for each tag is exactly sigmoid(its logit) on every image, so the answer
is known to the character; A1111's option keys and defaults are read back as its Settings hold them."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from mixkit.testing.tiny_deepbooru import crafted_deepbooru_state, save_deepbooru
from tests.webui.crafted_deepbooru import LOGITS, TAGS

A1111_DEFAULTS = {"interrogate_deepbooru_score_threshold": 0.5, "deepbooru_sort_alpha": True,
                  "deepbooru_use_spaces": True, "deepbooru_escape": True, "deepbooru_filter_tags": ""}


def png_base64(image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


IMAGE = png_base64(Image.new("RGB", (48, 32), (10, 200, 30)))


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving, deepbooru_folder):
    from webui.config import ServerConfig

    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path_factory.mktemp("out")), ui=False,
                          deepdanbooru_models_path=str(deepbooru_folder))
    with serving(config, load_model=False) as running:
        yield running


@pytest.fixture
def options(client):
    """Set options for one test; A1111's defaults come back afterwards."""
    def set_options(**values):
        response = client.post("/sdapi/v1/options", json=values)
        assert response.status_code == 200, response.text
    yield set_options
    set_options(**A1111_DEFAULTS, interrogate_return_ranks=False)


def interrogate(client):
    response = client.post("/sdapi/v1/interrogate", json={"image": IMAGE, "model": "deepdanbooru"})
    assert response.status_code == 200, response.text
    return response.json()["caption"]


def test_the_options_are_a1111s_keys_and_defaults(client):
    values = client.get("/sdapi/v1/options").json()
    assert {key: values[key] for key in A1111_DEFAULTS} == A1111_DEFAULTS


def test_deepdanbooru_answers_a1111s_tag_text(client):
    assert client.post("/sdapi/v1/interrogate", json={"image": IMAGE, "model": "deepdanbooru"}).json() == {
        "caption": "1girl, long hair, smile, solo"}


def test_the_options_shape_the_answer(client, options):
    options(deepbooru_sort_alpha=False, deepbooru_use_spaces=False, interrogate_return_ranks=True,
            interrogate_deepbooru_score_threshold=0.25, deepbooru_filter_tags="smile, long hair")
    assert interrogate(client) == "(1girl:0.953), (solo:0.881), (hat_\\(object\\):0.269)"
    options(deepbooru_escape=False, deepbooru_use_spaces=True, deepbooru_filter_tags="", interrogate_return_ranks=False,
            interrogate_deepbooru_score_threshold=0)
    assert interrogate(client) == "1girl, solo, long hair, smile, hat (object)"


@pytest.mark.parametrize("values, message", [
    ({"interrogate_deepbooru_score_threshold": 1.5}, "interrogate_deepbooru_score_threshold must be a number in [0, 1]"),
    ({"deepbooru_sort_alpha": "no"}, "deepbooru_sort_alpha must be true or false"),
    ({"deepbooru_filter_tags": ["solo"]}, "deepbooru_filter_tags must be a comma-separated string"),
])
def test_bad_deepbooru_options_are_refused_naming_them(client, values, message):
    response = client.post("/sdapi/v1/options", json=values)
    assert response.status_code == 422 and message in response.json()["detail"], response.text
    assert client.get("/sdapi/v1/options").json()["interrogate_deepbooru_score_threshold"] == 0.5


def test_a_folder_without_the_file_is_a_503_naming_the_download(tiny_sd1_dir, tmp_path, serving):
    import httpx

    from webui.config import ServerConfig

    (tmp_path / "empty").mkdir()
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path / "out"), ui=False,
                          deepdanbooru_models_path=str(tmp_path / "empty"))
    with serving(config, load_model=False) as running, httpx.Client(base_url=running.url, timeout=120) as http:
        response = http.post("/sdapi/v1/interrogate", json={"image": IMAGE, "model": "deepdanbooru"})
    assert response.status_code == 503
    assert "download model-resnet_custom_v3.pt from https://github.com/AUTOMATIC1111/TorchDeepDanbooru/" in \
        response.json()["detail"]


def test_a_broken_file_is_a_503_naming_it(tiny_sd1_dir, tmp_path, serving):
    import httpx

    from webui.config import ServerConfig

    (tmp_path / "models").mkdir()
    save_deepbooru(tmp_path / "models" / "model-resnet_custom_v3.pt", crafted_deepbooru_state(LOGITS), TAGS[:2])
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path / "out"), ui=False,
                          deepdanbooru_models_path=str(tmp_path / "models"))
    with serving(config, load_model=False) as running, httpx.Client(base_url=running.url, timeout=120) as http:
        response = http.post("/sdapi/v1/interrogate", json={"image": IMAGE, "model": "deepdanbooru"})
    assert response.status_code == 503
    assert "names 2 tags but its last layer scores 6" in response.json()["detail"]


def test_a_server_without_the_folder_answers_501_naming_the_flag(tiny_sd1_dir, tmp_path, serving):
    import httpx

    from webui.config import ServerConfig

    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path / "out"), ui=False)
    with serving(config, load_model=False) as running, httpx.Client(base_url=running.url, timeout=120) as http:
        response = http.post("/sdapi/v1/interrogate", json={"image": "not even an image", "model": "deepdanbooru"})
    assert response.status_code == 501
    assert response.json()["detail"].startswith("DeepBooru is not set up on this server: start it with "
                                                "--deepdanbooru-models-path FOLDER")


def test_a_missing_folder_is_refused_before_the_server_starts(tmp_path):
    from webui.config import ServerConfig, check_server_config

    with pytest.raises(ValueError, match="--deepdanbooru-models-path .*nope' is not a folder"):
        check_server_config(ServerConfig(models=["m"], deepdanbooru_models_path=str(tmp_path / "nope")))


def test_only_a1111s_model_name_is_accepted(client):
    # A1111's API knows "clip" and "deepdanbooru"; its UI's "deepbooru" is no API model name
    response = client.post("/sdapi/v1/interrogate", json={"image": IMAGE, "model": "deepbooru"})
    assert response.status_code == 404 and response.json()["detail"] == "Model not found"
