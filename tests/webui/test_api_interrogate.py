"""A1111's `POST /sdapi/v1/interrogate` with model "clip": the image2text_generation app's caption, then the best term
of each word list ranked by CLIP (A1111's BLIP + CLIP interrogator), under the Settings > Interrogate options.

Oracles: the same app and `mixkit.interrogate.ClipInterrogator` called in Python on the same image; the image is a
shapes-world render, so the right shape and colour are known. A1111's own answers are kept where a client may read
them: 404 "Model not found" for an unknown model, 404 "Image not found" for an empty image."""

from __future__ import annotations

import base64
import io
import re

import pytest

from mixkit.data.shapes_render import render_scene
from mixkit.data.shapes_vocab import Scene, ShapeSpec


def png_base64(image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.fixture(scope="module")
def circle():
    return render_scene(Scene((ShapeSpec("circle", "red", "large", "center"),), "blue"), 64)


@pytest.fixture(scope="module")
def caption(circle):
    """The captioning app's caption with the Interrogate settings' defaults (1 beam, 1 to 48 new tokens)."""
    from appflow import Appflow

    return Appflow("image2text_generation")(image=circle, num_beams=1, min_length=1, max_length=48)["text"]


@pytest.fixture
def options(client):
    """Set Settings > Interrogate options for one test; the module's server gets its defaults back afterwards."""
    from webui.interrogate_options import INTERROGATE_OPTION_DEFAULTS

    def set_options(**values):
        response = client.post("/sdapi/v1/options", json=values)
        assert response.status_code == 200, response.text
    yield set_options
    set_options(**INTERROGATE_OPTION_DEFAULTS)


def test_clip_interrogation_appends_the_best_term_of_each_built_in_list(client, circle, caption):
    from mixkit.interrogate import ClipInterrogator, InterrogateSettings, join_terms

    response = client.post("/sdapi/v1/interrogate", json={"image": png_base64(circle), "model": "clip"})
    assert response.status_code == 200, response.text
    expected = join_terms(caption, ClipInterrogator().terms(circle, InterrogateSettings()), False)
    assert response.json() == {"caption": expected}
    assert expected.startswith(f"{caption}, circle, red, ")  # shapes, colours, sizes: the render's own first two
    # "clip" is A1111's default model, and a data URL is read as the other image fields read it
    default = client.post("/sdapi/v1/interrogate", json={"image": "data:image/png;base64," + png_base64(circle)})
    assert default.status_code == 200 and default.json() == response.json()


def test_settings_give_ranks_and_skip_categories(client, circle, caption, options):
    options(interrogate_return_ranks=True, interrogate_clip_skip_categories=["sizes"])
    answer = client.post("/sdapi/v1/interrogate", json={"image": png_base64(circle)}).json()["caption"]
    assert re.fullmatch(re.escape(caption) + r", \(circle:[01]\.\d{3}\), \(red:[01]\.\d{3}\)", answer), answer
    options(interrogate_return_ranks=False, interrogate_clip_skip_categories=["sizes", "colours"])
    assert client.post("/sdapi/v1/interrogate", json={"image": png_base64(circle)}).json() == {
        "caption": f"{caption}, circle"}


def test_a_skip_name_no_list_has_is_a_422_naming_it(client, circle, options):
    options(interrogate_clip_skip_categories=["artists"])
    response = client.post("/sdapi/v1/interrogate", json={"image": png_base64(circle)})
    assert response.status_code == 422 and "names ['artists']" in response.json()["detail"]
    assert "['shapes', 'colours', 'sizes']" in response.json()["detail"]


@pytest.mark.parametrize("values, message", [
    ({"interrogate_clip_min_length": 60}, "interrogate_clip_min_length (60) must not exceed"),
    ({"interrogate_clip_num_beams": 0}, "interrogate_clip_num_beams must be a whole number in [1, 16]"),
    ({"interrogate_clip_dict_limit": -5}, "interrogate_clip_dict_limit must be a whole number >= 0"),
    ({"interrogate_clip_skip_categories": "sizes"}, "must be a list of category names"),
    ({"interrogate_return_ranks": 1}, "interrogate_return_ranks must be true or false"),
])
def test_bad_interrogate_options_are_refused_naming_them(client, values, message):
    response = client.post("/sdapi/v1/options", json=values)
    assert response.status_code == 422 and message in response.json()["detail"], response.text
    assert client.get("/sdapi/v1/options").json()["interrogate_clip_min_length"] == 1


def test_the_options_read_back_with_a1111s_keys(client):
    values = client.get("/sdapi/v1/options").json()
    assert {key: values[key] for key in values if key.startswith("interrogate_")} == {
        "interrogate_return_ranks": False, "interrogate_clip_dict_limit": 1500, "interrogate_clip_skip_categories": [],
        "interrogate_keep_models_in_memory": False, "interrogate_clip_num_beams": 1,
        "interrogate_clip_min_length": 1, "interrogate_clip_max_length": 48,
        "interrogate_deepbooru_score_threshold": 0.5}  # A1111's DeepBooru threshold shares the prefix


@pytest.fixture(scope="module")
def word_lists(tmp_path_factory):
    """An A1111-style interrogate/ folder: one true line in each list, the shape list appending its 2 best."""
    folder = tmp_path_factory.mktemp("interrogate")
    (folder / "colour.txt").write_text("green\nred\nyellow\n", encoding="utf-8")
    (folder / "shape.top2.txt").write_text("square\ncircle\ntriangle\n", encoding="utf-8")
    return folder


def test_a_categories_folder_is_ranked_instead(tiny_sd1_dir, tmp_path, serving, word_lists, circle, caption):
    import httpx

    from webui.config import ServerConfig

    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path), ui=False,
                          interrogate_categories_dir=str(word_lists))
    with serving(config, load_model=False) as running, httpx.Client(base_url=running.url, timeout=120) as http:
        answer = http.post("/sdapi/v1/interrogate", json={"image": png_base64(circle)}).json()["caption"]
    assert answer.startswith(f"{caption}, red, circle, ") and len(answer.split(", ")) == len(caption.split(", ")) + 3


def test_a_missing_categories_folder_is_refused_before_the_server_starts(tmp_path):
    from webui.config import ServerConfig, check_server_config

    with pytest.raises(ValueError, match="--interrogate-categories-dir: .*does not exist"):
        check_server_config(ServerConfig(models=["m"], interrogate_categories_dir=str(tmp_path / "nope")))
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="empty.txt' is empty"):
        check_server_config(ServerConfig(models=["m"], interrogate_categories_dir=str(tmp_path)))


@pytest.mark.parametrize("body, status, detail", [
    ({"image": "", "model": "clip"}, 404, "Image not found"),
    ({"model": "clip"}, 404, "Image not found"),
    ({"image": "aGVsbG8=", "model": "blip"}, 404, "Model not found"),
    ({"image": "aGVsbG8=", "model": "deepdanbooru"}, 501, "start it with --deepdanbooru-models-path FOLDER"),
    ({"image": "aGVsbG8=", "model": "clip"}, 422, "image: "),
    ({"image": "aGVsbG8=", "model": "clip", "extra": 1}, 422, "Unknown field(s) ['extra']"),
])
def test_a1111s_answers_to_requests_it_cannot_serve(client, body, status, detail):
    response = client.post("/sdapi/v1/interrogate", json=body)
    assert response.status_code == status, response.text
    assert detail in response.json()["detail"]
