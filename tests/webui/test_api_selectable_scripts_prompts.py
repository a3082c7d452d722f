"""`/sdapi/v1/txt2img` and `/img2img` with `script_name` "Prompt matrix" and "Prompts from file or textbox": A1111's
positional script_args, run through the registry's generic dispatch (webui/api_selectable_scripts.py)."""

from __future__ import annotations

import json
import os

import pytest
from PIL import Image

from pipelines.infotext import parse_infotext
from pipelines.scripts import prompt_matrix
from webui.base64_images import encode_png_base64

from .png_payloads import decode_png

TINY = {"prompt": "a cat|red|blue", "steps": 1, "seed": 3, "sampler_name": "Euler", "width": 64, "height": 64}


def post(client, kind="txt2img", **fields):
    return client.post(f"/sdapi/v1/{kind}", json={**TINY, **fields})


def test_prompt_matrix_answers_with_its_labelled_grid_then_every_combination(client, server):
    out = server.state.output_dir
    before = set(os.listdir(out)) if os.path.isdir(out) else set()
    response = post(client, script_name="prompt matrix", script_args=[False, True, "positive", "comma", 0],
                    batch_size=3, save_images=True)
    assert response.status_code == 200, response.text
    info = json.loads(response.json()["info"])
    grid, *images = [decode_png(data) for data in response.json()["images"]]
    assert info["index_of_first_image"] == 1 and len(images) == 4
    assert grid.width == 48 + 128 and grid.height > 128  # 2x2 cells, the parts labelled on top and left
    read = [parse_infotext(image.info["parameters"]) for image in images]
    assert [(r["Prompt"], r["Seed"]) for r in read] == [("a cat", "3"), ("a cat, red", "4"), ("a cat, blue", "5"),
                                                        ("a cat, red, blue", "6")]
    assert [parse_infotext(text)["Prompt"] for text in info["infotexts"]] == ["a cat", "a cat", "a cat, red",
                                                                              "a cat, blue", "a cat, red, blue"]
    new = sorted(set(os.listdir(out)) - before)
    grids = [name for name in new if name.startswith("prompt_matrix-") and name.endswith(".png")]
    assert len(grids) == 1 and Image.open(os.path.join(out, grids[0])).size == grid.size
    assert len([name for name in new if name.endswith(".png") and not name.startswith("prompt_matrix")]) == 4


def test_prompt_matrix_on_img2img_varies_the_negative_prompt(client):
    picture = Image.new("RGB", (64, 64), (200, 30, 30))
    response = post(client, "img2img", prompt="a cat", negative_prompt="dark|blurry",
                    init_images=[encode_png_base64(picture)], script_name="Prompt matrix",
                    script_args=[True, False, "negative", "space"])
    assert response.status_code == 200, response.text
    images = [decode_png(data) for data in response.json()["images"]]
    assert images[0].size == (128, images[0].height) and len(images) == 3
    assert [parse_infotext(image.info["parameters"]).get("Negative prompt") for image in images[1:]] == [
        "dark", "blurry dark"]


def test_prompts_from_textbox_run_every_line_without_a_grid(client):
    lines = "a red cat\n--prompt a dog --negative_prompt dark --steps 2 --n_iter 2\n--seed 11"
    response = post(client, prompt="photo", script_name="Prompts from file or textbox",
                    script_args=[True, False, "end", lines])
    assert response.status_code == 200, response.text
    info = json.loads(response.json()["info"])
    images = [decode_png(data) for data in response.json()["images"]]
    assert info["index_of_first_image"] == 0 and len(images) == 4
    read = [parse_infotext(image.info["parameters"]) for image in images]
    assert [(r["Prompt"], r.get("Negative prompt"), r["Steps"], r["Seed"]) for r in read] == [
        ("photo a red cat", "", "1", "3"), ("photo a dog", "dark", "2", "4"), ("photo a dog", "dark", "2", "5"),
        ("photo", "", "1", "11")]


@pytest.mark.parametrize("name, args, message", [
    ("prompt matrix", [False, False, "sideways"], "script_args prompt_type: must be one of 'positive', 'negative'"),
    ("prompt matrix", [False, False, "positive", "comma", 3.5], "margin_size: must be a whole number"),
    ("prompts from file or textbox", [False, False, "start", "a\n--steps 2 --nope 1"],
     "line 2: unknown option --nope"),
    ("prompts from file or textbox", [False, False, "start", "a\n\nb\n--steps 5000"],
     "Prompts from file or textbox, line 4: steps must be in [1, 1000], got 5000."),
    ("prompts from file or textbox", [False, False, "start", "a\n--width 100000"],
     "Prompts from file or textbox, line 2: width must be in [8, 4096], got 100000."),
    ("prompts from file or textbox", [False, False, "start", "--sampler_name Nope"], "unknown sampler 'Nope'"),
])
def test_bad_script_args_are_refused_before_queueing(client, name, args, message):
    response = post(client, script_name=name, script_args=args)
    assert response.status_code == 422 and message in response.json()["detail"], response.text


def test_prompt_matrix_refuses_too_many_parts(client):
    response = post(client, prompt="x" + "|p" * 10, script_name="prompt matrix", script_args=[])
    assert response.status_code == 422 and "the most is 9 parts" in response.json()["detail"], response.text


def test_scripts_and_script_info_list_both_in_a1111_order(client):
    listed = client.get("/sdapi/v1/scripts").json()
    for kind in ("txt2img", "img2img"):
        assert {"prompt matrix", "prompts from file or textbox"} <= set(listed[kind])
    info = {(entry["name"], entry["is_img2img"]): entry for entry in client.get("/sdapi/v1/script-info").json()}
    matrix = info[("prompt matrix", False)]["args"]
    assert [arg["label"] for arg in matrix] == ["Put variable parts at start of prompt",
                                                "Use different seed for each picture", "Select prompt",
                                                "Select joining char", "Grid margins (px)"]
    assert matrix[2]["choices"] == ["positive", "negative"] and matrix[4]["maximum"] == 500
    assert prompt_matrix.parse_script_args([arg["value"] for arg in matrix]) == prompt_matrix.PromptMatrixConfig()
    lines = info[("prompts from file or textbox", True)]["args"]
    assert [arg["label"] for arg in lines][:4] == ["Iterate seed every line", "Use same random seed for all lines",
                                                   "Insert prompts at the", "List of prompt inputs"]
    assert lines[2]["choices"] == ["start", "end"] and lines[2]["value"] == "start"


def test_sd_model_lines_switch_checkpoints_once_each_and_put_the_servers_back(single_file_checkpoints,
                                                                              single_file_serving, tmp_path):
    import httpx

    lines = "--prompt a --sd_model other\nb\n--prompt c --sd_model \"OTHER.safetensors\"\n--prompt d --sd_model sd1"
    with single_file_serving(single_file_checkpoints, tmp_path) as running, \
            httpx.Client(base_url=running.url, timeout=120) as http:
        state = running.state
        loads, switch = [], state.switch_checkpoint

        def recording(name, *args, **kwargs):
            loads.append(name)
            return switch(name, *args, **kwargs)

        state.switch_checkpoint = recording
        response = http.post("/sdapi/v1/txt2img", json={**TINY, "prompt": "", "script_name": "prompts from file or "
                                                        "textbox", "script_args": [False, False, "start", lines]})
        assert response.status_code == 200, response.text
        images = [decode_png(data) for data in response.json()["images"]]
        read = [parse_infotext(image.info["parameters"]) for image in images]
        assert [(r["Prompt"], r["Model"]) for r in read] == [("a", "other"), ("b", "sd1"), ("c", "other"),
                                                              ("d", "sd1")]
        assert images[0].tobytes() != images[1].tobytes()  # other weights, other image
        assert loads == ["other.safetensors", "sd1.safetensors"]  # other loaded once for lines 1 and 3, then back
        assert state.holder.entry.name == "sd1.safetensors"
        assert http.get("/sdapi/v1/options").json()["sd_model_checkpoint"].startswith("sd1.safetensors")

        loads.clear()
        unknown = http.post("/sdapi/v1/txt2img", json={**TINY, "script_name": "prompts from file or textbox",
                                                       "script_args": [False, False, "start", "a\n--sd_model othr"]})
        assert unknown.status_code == 422, unknown.text
        assert "line 2: --sd_model names an unknown checkpoint 'othr'; close names: 'other.safetensors" in \
            unknown.json()["detail"]
        assert loads == []  # refused before the first image

        failing = http.post("/sdapi/v1/txt2img", json={**TINY, "script_name": "prompts from file or textbox",
                                                       "script_args": [False, False, "start",
                                                                       "--sd_model other\n--sd_model broken"]})
        assert failing.status_code != 200 and "--sd_model could not load 'broken.safetensors" in failing.text
        assert loads[:2] == ["other.safetensors", "broken.safetensors"]
        assert state.holder.entry.name == "sd1.safetensors"  # put back after the failure too


def test_sd_model_lines_ending_on_another_checkpoint_answer_with_the_jobs_own(single_file_checkpoints,
                                                                             single_file_serving, tmp_path):
    """The response info names the job's checkpoint (loaded again at the end, as in A1111), not the last line's."""
    import httpx

    with single_file_serving(single_file_checkpoints, tmp_path) as running, \
            httpx.Client(base_url=running.url, timeout=120) as http:
        response = http.post("/sdapi/v1/txt2img", json={**TINY, "prompt": "", "script_name": "prompts from file or "
                                                        "textbox", "script_args": [False, False, "start",
                                                                                   "a\n--prompt b --sd_model other"]})
        assert response.status_code == 200, response.text
        info = json.loads(response.json()["info"])
        sd1, other = [parse_infotext(decode_png(data).info["parameters"]) for data in response.json()["images"]]
        assert [(r["Prompt"], r["Model"]) for r in (sd1, other)] == [("a", "sd1"), ("b", "other")]
        assert sd1["Model hash"] != other["Model hash"]
        assert (info["sd_model_name"], info["sd_model_hash"]) == ("sd1", sd1["Model hash"])
        assert [parse_infotext(text)["Model"] for text in info["infotexts"]] == ["sd1", "other"]
        assert running.state.holder.entry.name == "sd1.safetensors"
