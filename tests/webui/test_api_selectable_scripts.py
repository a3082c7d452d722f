"""`/sdapi/v1/txt2img` and `/img2img` with `script_name: "x/y/z plot"`: the registered script run through the job
queue, its grid first, bad `script_args` refused naming the slot (webui/api_selectable_scripts.py)."""

from __future__ import annotations

import json
import os

import pytest
from PIL import Image

from pipelines.infotext import parse_infotext
from webui.base64_images import encode_png_base64

from .png_payloads import decode_png

TINY = {"prompt": "a red cat", "steps": 1, "seed": 3, "sampler_name": "Euler", "width": 64, "height": 64}
# A1111's txt2img indexes: 4 Steps, 6 CFG Scale, 7 Prompt S/R
STEPS_BY_CFG = [4, "1,2", [], 6, "5,7", []]


def plot(client, kind="txt2img", **fields):
    return client.post(f"/sdapi/v1/{kind}", json={**TINY, "script_name": "X/Y/Z Plot", **fields})


def test_plot_answers_with_the_labelled_grid_first(client):
    response = plot(client, script_args=STEPS_BY_CFG)
    assert response.status_code == 200, response.text
    payload = response.json()
    info = json.loads(payload["info"])
    [grid] = [decode_png(data) for data in payload["images"]]
    assert grid.width > 128 and grid.height > 128  # 2x2 cells of 64 px, plus the labels' pads
    assert info["index_of_first_image"] == 1
    read = parse_infotext(info["infotexts"][0])
    assert (read["Script"], read["X Type"], read["X Values"], read["Y Type"], read["Y Values"]) == (
        "X/Y/Z plot", "Steps", "1,2", "CFG Scale", "5,7")
    assert parse_infotext(grid.info["parameters"])["Script"] == "X/Y/Z plot"


def test_sub_images_carry_their_own_infotexts_and_files_are_saved_as_asked(client, server):
    out = server.state.output_dir
    before = set(os.listdir(out)) if os.path.isdir(out) else set()
    args = [7, "red, blue", [], 4, "1,2", [], 0, "", [], True, True]  # Prompt S/R x Steps, Include Sub Images
    response = plot(client, script_args=args, save_images=True)
    assert response.status_code == 200, response.text
    images = [decode_png(data) for data in response.json()["images"]]
    assert len(images) == 5 and all(image.size == (64, 64) for image in images[1:])
    texts = [parse_infotext(image.info["parameters"]) for image in images[1:]]
    assert [(t["Prompt"], t["Steps"]) for t in texts] == [("a red cat", "1"), ("a blue cat", "1"),
                                                          ("a red cat", "2"), ("a blue cat", "2")]
    new = sorted(set(os.listdir(out)) - before)
    grids = [name for name in new if name.startswith("xyz_grid-") and name.endswith(".png")]
    assert len(grids) == 1 and Image.open(os.path.join(out, grids[0])).size == images[0].size
    assert len([name for name in new if name.endswith(".png") and not name.startswith("xyz_grid")]) == 4


def test_img2img_plot_varies_denoising(client):
    picture = Image.new("RGB", (64, 64), (200, 30, 30))
    response = plot(client, "img2img", init_images=[encode_png_base64(picture)],
                    script_args=["Denoising", "0.3, 0.9", [], "Nothing", "", [], "Nothing", "", [], False, True])
    assert response.status_code == 200, response.text
    images = [decode_png(data) for data in response.json()["images"]]
    assert [image.size for image in images] == [(128, 64), (64, 64), (64, 64)]  # no legend: the bare grid
    assert [parse_infotext(image.info["parameters"])["Denoising strength"] for image in images[1:]] == ["0.3", "0.9"]


@pytest.mark.parametrize("args, message", [
    ([4, "ten"], "script_args x_values: Steps takes whole numbers: 'ten'"),
    ([4, "1", [], 99, "1"], "script_args y_type: axis index 99 is out of range"),
    (["Prompt S/R", "dog, cat"], "Prompt S/R did not find 'dog'"),
    (["Sampler", "Euler, Nope"], "Sampler 'Nope'"),
    (["Checkpoint name", "nope"], "Unknown checkpoint 'nope'"),
    (["Steps", "1, 5000"], "steps"),
    (["RNG source", "XPU"], "RNG source 'XPU' is not one of 'GPU', 'CPU', 'NV'"),
    (["Image CFG Scale", "1.5"], "script_args x_type: unknown txt2img axis type 'Image CFG Scale'"),
    (["VAE", "x"], "Unknown VAE 'x' on the VAE axis. Valid names: 'Automatic', 'None' (the VAE files and folders"),
    (["Prompt S/R", "x" * 200_000], "could not be read as comma-separated values"),  # was csv.Error: a 500
    (["Steps", ",".join(["1-10000"] * 20)], "more than 10000 in all"),
    (["CFG Scale", "0-" + "9" * 400], "finite numbers"),  # was OverflowError: a 500
])
def test_bad_script_args_are_refused_naming_the_slot(client, args, message):
    response = plot(client, script_args=args)
    assert response.status_code == 422 and message in response.json()["detail"], response.text


def test_a_cell_over_the_server_limits_is_named_by_its_axis_values(client):
    response = plot(client, script_args=["Size", "64x64, 0x64", [], "CFG Scale", "5, 7"])
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == "X/Y/Z plot, cell Size: 0x64, CFG Scale: 5.0: width must be in [8, 4096], got 0."


def test_unknown_script_names_are_still_refused(client):
    response = client.post("/sdapi/v1/txt2img", json={**TINY, "script_name": "No such script"})
    assert response.status_code == 422 and "script_name='No such script'" in response.text


def test_scripts_and_script_info_list_the_plot_for_both_kinds(client):
    listed = client.get("/sdapi/v1/scripts").json()
    assert "x/y/z plot" in listed["txt2img"] and "x/y/z plot" in listed["img2img"]
    entries = [entry for entry in client.get("/sdapi/v1/script-info").json() if entry["name"] == "x/y/z plot"]
    assert sorted(entry["is_img2img"] for entry in entries) == [False, True]
    txt2img = next(entry for entry in entries if not entry["is_img2img"])
    assert len(txt2img["args"]) == 18 and txt2img["args"][0]["choices"][4] == "Steps"
    assert txt2img["args"][16] == {"label": "Grid margins (px)", "value": 0, "minimum": 0, "maximum": 500, "step": 2,
                                   "choices": None}


def test_checkpoint_axis_switches_and_puts_the_server_checkpoint_back(single_file_checkpoints, single_file_serving,
                                                                       tmp_path):
    import httpx

    with single_file_serving(single_file_checkpoints, tmp_path) as running, \
            httpx.Client(base_url=running.url, timeout=120) as http:
        args = ["Checkpoint name", "", ["other.safetensors", "sd1.safetensors"], "Nothing", "", [], "Nothing", "",
                [], False, True]
        response = http.post("/sdapi/v1/txt2img", json={**TINY, "script_name": "x/y/z plot", "script_args": args})
        assert response.status_code == 200, response.text
        _, other, sd1 = [decode_png(data) for data in response.json()["images"]]
        assert other.tobytes() != sd1.tobytes()  # other weights, other image
        assert parse_infotext(other.info["parameters"])["Model"] == "other"
        assert parse_infotext(sd1.info["parameters"])["Model"] == "sd1"
        assert running.state.holder.entry.name == "sd1.safetensors"  # the server's checkpoint, back
        assert http.get("/sdapi/v1/options").json()["sd_model_checkpoint"].startswith("sd1.safetensors")


def test_checkpoint_axis_ending_on_another_checkpoint_answers_with_the_jobs_own(single_file_checkpoints,
                                                                                  single_file_serving, tmp_path):
    """A1111's info names the checkpoint loaded again at the end (the job's), not the axis's last value."""
    import httpx

    with single_file_serving(single_file_checkpoints, tmp_path) as running, \
            httpx.Client(base_url=running.url, timeout=120) as http:
        args = ["Checkpoint name", "", ["sd1.safetensors", "other.safetensors"], "Nothing", "", [], "Nothing", "",
                [], False, True]
        response = http.post("/sdapi/v1/txt2img", json={**TINY, "script_name": "x/y/z plot", "script_args": args})
        assert response.status_code == 200, response.text
        info = json.loads(response.json()["info"])
        _, sd1, other = [parse_infotext(decode_png(data).info["parameters"]) for data in response.json()["images"]]
        assert (sd1["Model"], other["Model"]) == ("sd1", "other")  # each image names the checkpoint that made it
        assert sd1["Model hash"] != other["Model hash"]
        assert (info["sd_model_name"], info["sd_model_hash"]) == ("sd1", sd1["Model hash"])
        assert running.state.holder.entry.name == "sd1.safetensors"


def test_refiner_checkpoint_axis_refines_with_the_named_checkpoint(tiny_sd1_dir, tmp_path, serving):
    import shutil

    import httpx

    from webui.config import ServerConfig

    other = shutil.copytree(tiny_sd1_dir, tmp_path / "other")  # the same weights in another folder: a refiner
    config = ServerConfig(models=[str(tiny_sd1_dir), str(other)], output_dir=str(tmp_path / "out"), ui=False)
    with serving(config) as running, httpx.Client(base_url=running.url, timeout=120) as http:
        names = [model["title"] for model in http.get("/sdapi/v1/sd-models").json()]
        loaded = next(name for name in names if not name.startswith("other"))
        # the refiner that is the loaded checkpoint has nothing to switch to (A1111's apply_refiner): no Refiner key
        args = ["Refiner checkpoint", "", ["None", "other", loaded], "Nothing", "", [], "Nothing", "", [], False,
                True]
        response = http.post("/sdapi/v1/txt2img", json={**TINY, "steps": 4, "script_name": "x/y/z plot",
                                                        "script_args": args})
        assert response.status_code == 200, response.text
        texts = [parse_infotext(text) for text in json.loads(response.json()["info"])["infotexts"][1:]]
        assert [text.get("Refiner", "").split(" [")[0] for text in texts] == ["", "other", ""]
        assert texts[1]["Refiner switch at"] == "0.8"  # the call's (A1111's default)
        bad = http.post("/sdapi/v1/txt2img", json={**TINY, "script_name": "x/y/z plot",
                                                   "script_args": ["Refiner checkpoint", "None,nope"]})
        assert bad.status_code == 422 and "Unknown checkpoint 'nope' on the Refiner checkpoint axis" in bad.text
        # the request's own switch point, with no refiner of its own, is where the axis's refiner takes over
        only_other = ["Refiner checkpoint", "", ["other"], "Nothing", "", [], "Nothing", "", [], False, True]
        at_half = http.post("/sdapi/v1/txt2img", json={**TINY, "steps": 4, "script_name": "x/y/z plot",
                                                       "refiner_switch_at": 0.5, "script_args": only_other})
        assert at_half.status_code == 200, at_half.text
        assert parse_infotext(json.loads(at_half.json()["info"])["infotexts"][-1])["Refiner switch at"] == "0.5"
        at_end = http.post("/sdapi/v1/txt2img", json={**TINY, "script_name": "x/y/z plot", "refiner_switch_at": 1,
                                                      "script_args": only_other})
        assert at_end.status_code == 422 and "X/Y/Z plot, cell other: refiner_switch_at must be" in at_end.text


@pytest.mark.parametrize("axis, values, message", [
    ("Hires steps", "1, 1000000000000000000000", "hr_second_pass_steps must be in [0, "),
    ("Denoising", "0.5, 1.5", "denoising_strength must be a number in [0, 1], got 1.5"),
])
def test_a_hires_cell_is_checked_before_queueing(client, axis, values, message):
    """A cell's hires fields passed the pre-queue check and failed in the worker; now the plot is refused first."""
    response = plot(client, enable_hr=True, hr_scale=1, script_args=[axis, values, [], "Nothing", ""])
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith(f"X/Y/Z plot, cell {axis}: ")
    assert message in response.json()["detail"]
