"""The A1111-compatible HTTP API against a live server on a free localhost port, driven with httpx."""

from __future__ import annotations

import base64
import io
import json
import time

import httpx
import pytest
from PIL import Image

SMALL = {"steps": 1, "width": 64, "height": 64, "sampler_name": "Euler", "cfg_scale": 5.0}


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("api")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False, queue_size=4)) as running:
        yield running


def decode_png(data: str) -> Image.Image:
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    image.load()
    return image


def test_txt2img_returns_a1111_shape_with_infotext_in_png(client):
    response = client.post("/sdapi/v1/txt2img", json={"prompt": "a red cube", "seed": 1234, "batch_size": 2, **SMALL})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"images", "parameters", "info"}
    info = json.loads(body["info"])
    assert len(body["images"]) == 2
    assert info["all_seeds"] == [1234, 1235]
    assert info["seed"] == 1234 and info["steps"] == 1 and info["width"] == 64 and info["sampler_name"] == "Euler"
    assert body["parameters"]["prompt"] == "a red cube" and body["parameters"]["n_iter"] == 1
    for data, infotext in zip(body["images"], info["infotexts"]):
        image = decode_png(data)
        assert image.format == "PNG" and image.size == (64, 64)
        assert image.info["parameters"] == infotext
        assert infotext.startswith("a red cube\nSteps: 1, Sampler: Euler")
    assert "Seed: 1234," in info["infotexts"][0] and "Seed: 1235," in info["infotexts"][1]


def test_txt2img_same_seed_same_pixels(client):
    payload = {"prompt": "a cat", "seed": 77, **SMALL}
    first = client.post("/sdapi/v1/txt2img", json=payload).json()["images"][0]
    second = client.post("/sdapi/v1/txt2img", json=payload).json()["images"][0]
    assert decode_png(first).tobytes() == decode_png(second).tobytes()


def test_txt2img_save_images_writes_png_with_infotext_to_output_folder(client, server):
    before = set(server.state.output_dir.glob("*.png")) if server.state.output_dir.exists() else set()
    body = client.post("/sdapi/v1/txt2img", json={"prompt": "saved ../../evil", "seed": 5, "save_images": True, **SMALL}).json()
    new = sorted(set(server.state.output_dir.glob("*.png")) - before)
    assert len(new) == 1
    assert new[0].name.endswith("-5.png") and "evil" not in new[0].name  # names never come from the prompt
    with Image.open(new[0]) as image:
        image.load()
        assert image.info["parameters"] == json.loads(body["info"])["infotexts"][0]
    assert not list(server.state.output_dir.glob("*.tmp*")) and not list(server.state.output_dir.glob(".*"))


def test_save_images_with_two_images_returns_and_saves_a1111s_grid_first(client, server):
    # A1111's API sets do_not_save_grid = not save_images; with return_grid and grid_save on (their defaults)
    # process_images puts the grid first (index_of_first_image 1, the first image's infotext) and saves grid-NNNN.png.
    out = server.state.output_dir
    grids_before = set(out.glob("grid-*.png")) if out.exists() else set()
    body = client.post("/sdapi/v1/txt2img", json={"prompt": "two", "seed": 3, "batch_size": 2, "save_images": True,
                                                  **SMALL}).json()
    info = json.loads(body["info"])
    images = [Image.open(io.BytesIO(base64.b64decode(data))) for data in body["images"]]
    assert len(images) == 3 and info["index_of_first_image"] == 1
    assert info["infotexts"] == [info["infotexts"][1], *info["infotexts"][1:]] and len(info["infotexts"]) == 3
    assert info["all_seeds"] == [3, 4]
    width, height = images[1].size
    assert images[0].size == (2 * width, height)  # round(sqrt(2)) = 1 row of 2
    assert list(images[0].crop((width, 0, 2 * width, height)).getdata()) == list(images[2].convert("RGB").getdata())
    assert images[0].info["parameters"] == info["infotexts"][1]
    new_grids = sorted(set(out.glob("grid-*.png")) - grids_before)
    assert len(new_grids) == 1
    with Image.open(new_grids[0]) as saved:
        assert saved.info["parameters"] == info["infotexts"][1]

    unsaved = json.loads(client.post("/sdapi/v1/txt2img", json={"prompt": "two", "seed": 3, "batch_size": 2,
                                                                **SMALL}).json()["info"])
    assert unsaved["index_of_first_image"] == 0 and len(unsaved["infotexts"]) == 2  # no grid without save_images
    assert sorted(set(out.glob("grid-*.png")) - grids_before) == new_grids


def test_return_grid_and_grid_save_off_make_no_api_grid(client, server):
    out = server.state.output_dir
    grids_before = set(out.glob("grid-*.png")) if out.exists() else set()
    assert client.post("/sdapi/v1/options", json={"return_grid": False}).status_code == 200
    try:
        body = client.post("/sdapi/v1/txt2img", json={"prompt": "two", "seed": 3, "batch_size": 2, "save_images": True,
                                                      **SMALL}).json()
        assert len(body["images"]) == 2 and json.loads(body["info"])["index_of_first_image"] == 0
        assert len(set(out.glob("grid-*.png")) - grids_before) == 1  # grid_save alone still writes it
        assert client.post("/sdapi/v1/options", json={"grid_save": False}).status_code == 200
        client.post("/sdapi/v1/txt2img", json={"prompt": "two", "seed": 3, "batch_size": 2, "save_images": True, **SMALL})
        assert len(set(out.glob("grid-*.png")) - grids_before) == 1
    finally:
        client.post("/sdapi/v1/options", json={"return_grid": True, "grid_save": True})


def test_info_reports_a_concrete_subseed_and_its_batch_sequence(client):
    # A1111: subseed = get_fixed_seed(p.subseed) (-1 -> random in [0, 4294967294)), all_subseeds = subseed + i.
    info = json.loads(client.post("/sdapi/v1/txt2img", json={"prompt": "x", "seed": 5, "batch_size": 2,
                                                              **SMALL}).json()["info"])
    assert isinstance(info["subseed"], int) and 0 <= info["subseed"] < 4294967294
    assert info["all_subseeds"] == [info["subseed"], info["subseed"] + 1] and info["all_seeds"] == [5, 6]
    given = json.loads(client.post("/sdapi/v1/txt2img", json={"prompt": "x", "seed": 5, "batch_size": 2, "subseed": 77,
                                                               **SMALL}).json()["info"])
    assert (given["subseed"], given["all_subseeds"]) == (77, [77, 78])


def test_override_settings_samples_save_and_grid_options_apply_to_that_request_only(client, server):
    # A1111 applies override_settings for the job: samples_save off saves no samples, grid_save off no grid.
    out = server.state.output_dir
    before = set(out.glob("*.png")) if out.exists() else set()
    body = client.post("/sdapi/v1/txt2img", json={"prompt": "x", "seed": 9, "batch_size": 2, "save_images": True,
                                                  "override_settings": {"samples_save": False, "grid_save": False,
                                                                        "return_grid": False}, **SMALL})
    assert body.status_code == 200 and len(body.json()["images"]) == 2
    assert (set(out.glob("*.png")) if out.exists() else set()) == before  # neither samples nor a grid written
    assert server.state.options.get("samples_save") is True and server.state.options.get("grid_save") is True
    refused = client.post("/sdapi/v1/txt2img", json={"prompt": "x", "override_settings": {"samples_save": "no"}, **SMALL})
    assert refused.status_code == 422 and "samples_save must be true or false, got 'no'" in refused.json()["detail"]


def test_txt2img_hires_fix(client):
    response = client.post("/sdapi/v1/txt2img", json={"prompt": "big", "seed": 8, "enable_hr": True, "hr_scale": 1.5,
                                                       "hr_upscaler": "Lanczos", "denoising_strength": 0.5, **SMALL})
    assert response.status_code == 200, response.text
    image = decode_png(response.json()["images"][0])
    assert image.size == (96, 96)
    infotext = json.loads(response.json()["info"])["infotexts"][0]
    assert "Size: 64x64" in infotext and "Hires upscale: 1.5" in infotext and "Hires upscaler: Lanczos" in infotext


def test_img2img_with_and_without_mask(client):
    source = Image.new("RGB", (64, 64), (200, 30, 30))
    buffer = io.BytesIO()
    source.save(buffer, format="PNG")
    init = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    response = client.post("/sdapi/v1/img2img", json={"init_images": [init], "prompt": "x", "denoising_strength": 0.5,
                                                       "seed": 3, **SMALL})
    assert response.status_code == 200, response.text
    info = json.loads(response.json()["info"])
    assert info["denoising_strength"] == 0.5 and "Denoising strength: 0.5" in info["infotexts"][0]
    assert response.json()["parameters"]["init_images"] is None  # A1111 leaves images out of the echo

    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (0, 0, 32, 64))
    buffer = io.BytesIO()
    mask.save(buffer, format="PNG")
    response = client.post("/sdapi/v1/img2img", json={
        "init_images": [init], "mask": base64.b64encode(buffer.getvalue()).decode(), "prompt": "x", "seed": 3,
        "inpainting_fill": 1, "inpaint_full_res": False, "mask_blur": 0, **SMALL})
    assert response.status_code == 200, response.text
    result = decode_png(response.json()["images"][0]).convert("RGB")
    assert result.getpixel((60, 10)) == (200, 30, 30)  # unmasked pixels come back unchanged
    assert "Mask blur" not in json.loads(response.json()["info"])["infotexts"][0]  # A1111 writes it only when > 0


def test_options_get_and_set(client, server):
    options = client.get("/sdapi/v1/options").json()
    assert options["sd_model_checkpoint"] == server.state.model_title
    assert options["CLIP_stop_at_last_layers"] == 1
    assert client.post("/sdapi/v1/options", json={"CLIP_stop_at_last_layers": 2}).status_code == 200
    try:
        assert client.get("/sdapi/v1/options").json()["CLIP_stop_at_last_layers"] == 2
        response = client.post("/sdapi/v1/txt2img", json={"prompt": "p", "seed": 1, **SMALL})
        assert response.status_code == 200, response.text
        assert "Clip skip: 2" in json.loads(response.json()["info"])["infotexts"][0]
    finally:
        client.post("/sdapi/v1/options", json={"CLIP_stop_at_last_layers": 1})


@pytest.mark.parametrize("changes, fragment", [
    ({"outdir_txt2img_samples": "/tmp/elsewhere"}, "cannot be set over the API"),
    ({"no_such_option": 1}, "Option 'no_such_option' is not a setting of this server"),
    # A1111 sets the keys before an unknown one, then fails: here nothing of the body is applied
    ({"CLIP_stop_at_last_layers": 2, "no_such_option": 1}, "'no_such_option' is not a setting of this server (a typo, "
                                                           "or an A1111 extension's option); nothing was changed"),
    ({"CLIP_stop_at_last_layers": 99}, "[1, 12]"),
    ({"sd_model_checkpoint": "../../etc/passwd"}, "Unknown checkpoint"),
])
def test_options_refuses_bad_changes_and_keeps_state(client, server, changes, fragment):
    before = client.get("/sdapi/v1/options").json()
    response = client.post("/sdapi/v1/options", json=changes)
    assert response.status_code == 422
    assert fragment in response.json()["detail"]
    assert client.get("/sdapi/v1/options").json() == before


def test_a_failing_generation_is_a_json_500_and_the_server_goes_on(client, server, monkeypatch):
    def broken(*args, **kwargs):
        raise AttributeError("model is broken")

    monkeypatch.setattr(type(server.state.holder.txt2img()), "__call__", broken)
    response = client.post("/sdapi/v1/txt2img", json={"prompt": "p", **SMALL})
    assert response.status_code == 500
    assert response.json()["error"] == "AttributeError" and "model is broken" in response.json()["detail"]
    monkeypatch.undo()
    assert client.post("/sdapi/v1/txt2img", json={"prompt": "p", **SMALL}).status_code == 200


def test_info_job_timestamp_is_the_jobs_and_progress_keeps_it(client):
    info = json.loads(client.post("/sdapi/v1/txt2img", json={"prompt": "a cube", "steps": 1, "seed": 3}).json()["info"])
    time.sleep(1.1)  # a later clock reading would differ: both must be the job's start, as A1111's state.job_timestamp
    assert client.get("/sdapi/v1/progress").json()["state"]["job_timestamp"] == info["job_timestamp"]


def test_progress_idle_shape_and_interrupt_with_nothing_running(client):
    progress = client.get("/sdapi/v1/progress").json()
    assert progress["progress"] == 0 and progress["current_image"] is None
    assert {"sampling_step", "sampling_steps", "job_count", "interrupted", "skipped", "job"} <= set(progress["state"])
    response = client.post("/sdapi/v1/interrupt")
    assert response.status_code == 200 and response.json() == {"interrupted": False}


def test_schedulers_are_a1111s_twelve_with_its_fields(client):
    listed = client.get("/sdapi/v1/schedulers").json()
    assert [s["name"] for s in listed] == [
        "automatic", "uniform", "karras", "exponential", "polyexponential", "sgm_uniform", "kl_optimal",
        "align_your_steps", "simple", "normal", "ddim", "beta"]
    by_name = {s["name"]: s for s in listed}
    assert by_name["karras"] == {"name": "karras", "label": "Karras", "aliases": None, "default_rho": 7.0,
                                 "need_inner_model": False}
    assert by_name["sgm_uniform"]["aliases"] == ["SGMUniform"] and by_name["sgm_uniform"]["need_inner_model"] is True
    assert by_name["polyexponential"]["default_rho"] == 1.0 and by_name["kl_optimal"]["default_rho"] == -1.0


def test_samplers_models_loras_and_refresh(client, server):
    from pipelines.samplers import list_samplers

    assert client.get("/sdapi/v1/samplers").json() == list_samplers()
    models = client.get("/sdapi/v1/sd-models").json()
    assert [m["title"] for m in models] == [server.state.model_title]
    assert set(models[0]) == {"title", "model_name", "hash", "sha256", "filename", "config"}
    assert client.post("/sdapi/v1/refresh-checkpoints").status_code == 200
    assert client.get("/sdapi/v1/loras").json() == []  # no LoRA folder configured


def test_png_info_reads_back_generated_infotext(client):
    body = client.post("/sdapi/v1/txt2img", json={"prompt": "a (blue:1.2) sphere", "negative_prompt": "ugly", "seed": 9, **SMALL}).json()
    response = client.post("/sdapi/v1/png-info", json={"image": "data:image/png;base64," + body["images"][0]})
    assert response.status_code == 200
    read = response.json()
    assert read["info"] == json.loads(body["info"])["infotexts"][0]
    assert read["parameters"]["Prompt"] == "a (blue:1.2) sphere"
    assert read["parameters"]["Negative prompt"] == "ugly"
    assert read["parameters"]["Seed"] == "9" and read["parameters"]["Size-1"] == "64"


def test_extras_upscale(client):
    from pipelines.upscale import UPSCALERS

    source = Image.new("RGB", (16, 8), (10, 200, 30))
    source.putpixel((0, 0), (255, 255, 255))
    buffer = io.BytesIO()
    source.save(buffer, format="PNG")
    data = base64.b64encode(buffer.getvalue()).decode()
    assert [u["name"] for u in client.get("/sdapi/v1/upscalers").json()] == ["None", *UPSCALERS.names()]
    # "None" (webuiapi's default upscaler_1) is A1111's "no upscaler": the image comes back as sent.
    response = client.post("/sdapi/v1/extra-single-image", json={"image": data, "upscaling_resize": 2})
    assert response.status_code == 200, response.text
    assert decode_png(response.json()["image"]).convert("RGB").tobytes() == source.tobytes()
    response = client.post("/sdapi/v1/extra-single-image", json={"image": data, "upscaling_resize": 2, "upscaler_1": "Nearest"})
    assert response.status_code == 200, response.text
    upscaled = decode_png(response.json()["image"]).convert("RGB")
    assert upscaled.size == (32, 16)
    assert upscaled.tobytes() == source.resize((32, 16), Image.Resampling.NEAREST).tobytes()
    for bad, fragment in (({"upscaler_1": "../../x"}, "../../x"), ({"upscaling_resize": 1000, "upscaler_1": "Nearest"}, "scale"),
                          ({"gfpgan_visibility": 1}, "gfpgan_visibility")):
        response = client.post("/sdapi/v1/extra-single-image", json={"image": data, **bad})
        assert response.status_code == 422 and fragment in response.text


def test_png_info_of_an_image_without_infotext(client):
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, format="PNG")
    read = client.post("/sdapi/v1/png-info", json={"image": base64.b64encode(buffer.getvalue()).decode()}).json()
    assert read["info"] == "" and read["parameters"] == {}


def test_interrupt_stops_a_running_generation(client, server):
    import threading
    import time

    results = {}

    def generate():
        with httpx.Client(base_url=server.url, timeout=120) as other:
            results["response"] = other.post("/sdapi/v1/txt2img", json={"prompt": "long", **{**SMALL, "steps": 200}})

    thread = threading.Thread(target=generate)
    thread.start()
    deadline = time.monotonic() + 60
    while client.get("/sdapi/v1/progress").json()["state"]["sampling_step"] < 1:
        assert time.monotonic() < deadline and thread.is_alive(), f"generation never started: {results}"
        time.sleep(0.05)
    progress = client.get("/sdapi/v1/progress").json()
    assert progress["state"]["sampling_steps"] == 200 and 0 < progress["progress"] < 1
    assert client.post("/sdapi/v1/interrupt").json() == {"interrupted": True}
    thread.join(60)
    response = results["response"]
    assert response.status_code == 200
    info = json.loads(response.json()["info"])
    assert info["interrupted"] is True and len(response.json()["images"]) == 1
    assert client.get("/sdapi/v1/progress").json()["state"]["job"] == ""
