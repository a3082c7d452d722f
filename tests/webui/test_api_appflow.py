"""`POST /appflow/{app}`: inputs from the app's declared ports, models from the operator, never from the request."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

OPTIONS = {"steps": 1, "width": 64, "height": 64, "sampler": "Euler", "seed": 5}


def _png_base64() -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 0, 0)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("appflow")
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False,
                          appflow_models={"text2image_generation": {"generator": str(tiny_sd1_dir)},
                                          "image2image_text_guided_generation": {"generator": str(tiny_sd1_dir)}})
    with serving(config, load_model=False) as running:
        yield running


def test_apps_are_listed_with_their_declared_inputs_and_configured_models(client, server):
    from appflow import APPS

    apps = {a["name"]: a for a in client.get("/appflow").json()}
    assert list(apps) == APPS.names()
    assert apps["text2image_generation"]["inputs"] == {"prompt": "text"}
    assert apps["text2image_generation"]["models"]["generator"]["source"] == str(server.state.config.models[0])


def test_text_to_image_app_runs_and_returns_png_images(client):
    response = client.post("/appflow/text2image_generation", json={"inputs": {"prompt": "a lamp"}, "options": OPTIONS})
    assert response.status_code == 200, response.text
    outputs = response.json()["outputs"]
    image = Image.open(io.BytesIO(base64.b64decode(outputs["images"][0])))
    assert image.format == "PNG" and image.size == (64, 64)


def test_text_to_image_app_takes_the_variation_seed_and_returns_its_infotexts(client):
    from pipelines.infotext import parse_infotext

    options = {**OPTIONS, "batch_size": 2, "subseed": 40, "subseed_strength": 0.25}
    response = client.post("/appflow/text2image_generation", json={"inputs": {"prompt": "a lamp"}, "options": options})
    assert response.status_code == 200, response.text
    infos = [parse_infotext(text) for text in response.json()["outputs"]["infotexts"]]
    assert [(info["Seed"], info["Variation seed"], info["Variation seed strength"]) for info in infos] == [
        ("5", "40", "0.25"), ("5", "41", "0.25")]
    assert response.json()["outputs"]["seeds"] == [5, 5]  # each image's seed (a variation keeps it), as JSON numbers


def test_image_input_is_decoded_from_base64(client):
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (0, 90, 200)).save(buffer, format="PNG")
    inputs = {"image": base64.b64encode(buffer.getvalue()).decode(), "prompt": "sea"}
    response = client.post("/appflow/image2image_text_guided_generation", json={"inputs": inputs, "options": OPTIONS})
    assert response.status_code == 200, response.text
    assert Image.open(io.BytesIO(base64.b64decode(response.json()["outputs"]["image"]))).size == (64, 64)


@pytest.mark.parametrize("app, body, status, fragment", [
    ("no_such_app", {"inputs": {}}, 422, "no_such_app"),
    ("..%2F..%2Fetc%2Fpasswd", {"inputs": {}}, 404, "Not Found"),
    ("..passwd", {"inputs": {}}, 422, "AppFlow app"),
    ("text2image_generation", {"inputs": {"prompt": "x", "extra": 1}}, 422, "has no input(s) ['extra']"),
    ("text2image_generation", {"inputs": {}}, 422, "required"),
    ("text2image_generation", {"inputs": {"prompt": 5}}, 422, "must be a string"),
    ("image2image_text_guided_generation", {"inputs": {"image": "/etc/passwd", "prompt": "x"}}, 422, "not valid base64"),
    ("text2image_generation", {"inputs": {"prompt": "x"}, "options": {"steps": 10**9}}, 422, "option steps"),
    ("text2image_generation", {"inputs": {"prompt": "x"}, "options": {"width": 100000}}, 422, "width"),
    ("text2image_generation", {"inputs": {"prompt": "x"}, "options": {"no_option": 1}}, 422, "no_option"),
    ("text2image_generation", {"inputs": {"prompt": "x"}, "models": ["/etc/passwd"]}, 422, "models"),
    ("text2image_generation", {"inputs": {"prompt": "x"}, "options": {"subseed_strength": 2}}, 422,
     "subseed_strength must be a number in [0, 1]"),
    ("text2image_generation", {"inputs": {"prompt": "x"}, "options": {"subseed": 2**60}}, 422, "option subseed"),
    ("text2image_generation", {"inputs": {"prompt": "x"}, "options": {"seed_resize_from_w": -8}}, 422,
     "seed_resize_from_w must be 0 (off) or a size in pixels, got -8"),
    ("text2image_generation", {"inputs": {"prompt": "x"}, "options": {"seed_resize_from_w": 100000,
                                                                      "seed_resize_from_h": 64}}, 422,
     "seed_resize_from_w/h 100000x64"),
    # a request never names a server file: these loaded any LoRA file on the disk (and told which paths exist) and
    # read the lines of any folder's *.txt files back to the client
    ("text2image_generation", {"inputs": {"prompt": "x"}, "options": {"loras": ["/etc/passwd"]}}, 422,
     "option loras: '/etc/passwd' needs a LoRA folder"),
    ("text2image_generation", {"inputs": {"prompt": "x"}, "options": {"loras": "../../etc/passwd"}}, 422,
     "option loras must be a list of"),
    ("clip_interrogation", {"inputs": {"image": _png_base64()}, "options": {"categories_dir": "/etc"}}, 422,
     "option categories_dir names a folder on the server"),
])
def test_bad_app_requests(client, app, body, status, fragment):
    response = client.post(f"/appflow/{app}", json=body)
    assert response.status_code == status, response.text
    assert fragment in response.text and "root:" not in response.text


def test_ui_widgets_follow_the_declared_ports():
    from webui.ui.appflow_tab import widget_value

    assert widget_value("texts", "cat\n\n dog \n") == ["cat", "dog"]
    assert widget_value("text?", "") is None and widget_value("texts", "") is None
    assert widget_value("flag", True) is True


def test_the_ui_hands_over_transparency_for_the_app_to_read_as_it_reads_files(tmp_path):
    """Gradio's image_mode="RGB" dropped the alpha: a transparent picture came out on black in the UI (on white from
    Python and HTTP), and a mask's strokes on a transparent layer were lost."""
    import numpy as np
    from gradio.data_classes import FileData

    from appflow.image_inputs import read_image_input, read_mask_input
    from webui.ui.appflow_tab import input_widget

    pixels = np.zeros((8, 8, 4), np.uint8)
    pixels[2:4, 2:4] = (255, 0, 0, 255)
    Image.fromarray(pixels, "RGBA").save(tmp_path / "logo.png")
    picture = input_widget("image", "image").preprocess(FileData(path=str(tmp_path / "logo.png")))
    assert np.array_equal(np.asarray(read_image_input(picture, "image")),
                          np.asarray(read_image_input(tmp_path / "logo.png", "image")))  # on white, as from a file
    mask = input_widget("mask", "image", mask=True).preprocess(FileData(path=str(tmp_path / "logo.png")))
    assert np.array_equal(np.asarray(read_mask_input(mask, "mask")) > 0, pixels[..., 3] > 0)  # only the strokes


def test_a_lora_tag_in_an_app_uses_the_servers_lora_folder(tiny_sd1_dir, tmp_path, serving):
    import httpx

    from webui.config import ServerConfig

    (tmp_path / "loras").mkdir()
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path / "outputs"), ui=False,
                          lora_dir=str(tmp_path / "loras"),
                          appflow_models={"text2image_generation": {"generator": str(tiny_sd1_dir)}})
    with serving(config, load_model=False) as running, httpx.Client(base_url=running.url, timeout=120) as http:
        response = http.post(
            "/appflow/text2image_generation", json={"inputs": {"prompt": "a lamp <lora:nowhere:1>"}, "options": OPTIONS})
    # The flow looked in the server's folder (before: "this flow has no LoRA folder"), and an unknown name is the
    # request's mistake, refused before the model loads: a 422, not the 503 of a model that cannot run.
    assert response.status_code == 422 and "No LoRA named 'nowhere'" in response.text
    assert "no LoRA folder" not in response.text


@pytest.mark.parametrize("options, fragment", [
    ({"num_beams": 16, "num_return_sequences": 16}, "num_beams x num_return_sequences = 256"),
    ({"max_new_tokens": 1024}, "max_new_tokens must be at most 256"),
])
def test_captioning_options_are_held_to_the_servers_limits(options, fragment):
    # HTTP clients may now set LAVIS' generation options; beams x sequences are rows of one generate call.
    from pipelines.params import GenerationLimits
    from webui.appflow_io import check_app_options

    with pytest.raises(ValueError, match=fragment):
        check_app_options(options, GenerationLimits())
    assert check_app_options({"num_beams": 4, "num_return_sequences": 2, "max_new_tokens": 40}, GenerationLimits())


@pytest.mark.parametrize("options, fragment", [
    ({"num_inference_steps": 10**6}, r"option steps must be an integer in \[1, "),
    ({"num_images_per_prompt": 10**3}, r"option batch_size must be an integer in \[1, "),
    ({"steps": 2, "num_inference_steps": 2}, "got option 'steps' twice"),
])
def test_diffusers_spellings_of_sd_options_are_held_to_the_servers_limits(options, fragment):
    from pipelines.params import GenerationLimits
    from webui.appflow_io import check_app_options

    with pytest.raises(ValueError, match=fragment):
        check_app_options(options, GenerationLimits())


def _png_base64(color) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (48, 40), color).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_a_list_of_images_is_captioned_as_one_batch_and_blip2_prompt_is_taken_as_in_python(client):
    """As `Appflow('image2text_generation')(image=[a, b], blip2_prompt=...)` (before: 422 for both)."""
    from appflow import Appflow

    red, blue = _png_base64((220, 30, 30)), _png_base64((30, 60, 220))
    body = {"inputs": {"image": [red, blue], "blip2_prompt": "a photo of"}, "options": {"max_new_tokens": 4}}
    response = client.post("/appflow/image2text_generation", json=body)
    assert response.status_code == 200, response.text
    texts = response.json()["outputs"]["texts"]
    images = [Image.open(io.BytesIO(base64.b64decode(b))).convert("RGB") for b in (red, blue)]
    assert texts == Appflow("image2text_generation", max_new_tokens=4)(image=images, prompt="a photo of")["texts"]


def test_lists_aliases_and_their_errors_when_decoding_app_inputs():
    from appflow import describe_app
    from webui.appflow_io import decode_app_inputs

    limits = dict(max_pixels=10**6, max_bytes=10**6, max_chars=100)
    caption = describe_app("image2text_generation")
    assert caption["batch_inputs"] == ["image", "question"]
    decoded = decode_app_inputs(caption, {"image": [_png_base64((1, 2, 3))], "minigpt4_text": ["what?"]}, **limits)
    assert len(decoded["image"]) == 1 and decoded["question"] == ["what?"]
    with pytest.raises(ValueError, match=r"got input 'prompt' twice, as 'prompt' and as 'blip2_prompt'"):
        decode_app_inputs(caption, {"prompt": "a", "blip2_prompt": "a"}, **limits)
    with pytest.raises(ValueError, match=r"input 'image' \(image\) is an empty list"):
        decode_app_inputs(caption, {"image": []}, **limits)
    detect = describe_app("openset_det_sam")
    with pytest.raises(ValueError, match=r"input 'image' \(image\) takes one base64 image, not a list \(this app takes "
                                         r"lists for: none of its inputs\)"):
        decode_app_inputs(detect, {"image": [_png_base64((1, 2, 3))], "prompt": "dog"}, **limits)
    with pytest.raises(ValueError, match=r"holds 3 items; this server takes at most 2 per request"):
        decode_app_inputs(caption, {"image": [_png_base64((1, 2, 3))] * 3}, **limits, max_items=2)


def test_option_errors_name_the_step_and_lavis_spellings_meet_the_servers_limits(client):
    from pipelines.params import GenerationLimits
    from webui.appflow_io import check_app_options

    response = client.post("/appflow/image2text_generation",
                           json={"inputs": {"image": _png_base64((1, 2, 3))}, "options": {"top_k": "x"}})
    assert response.status_code == 422
    assert "step 'caption'" in response.text and "top_k must be None or an integer" in response.text
    with pytest.raises(ValueError, match="max_new_tokens must be at most 256"):
        check_app_options({"max_length": 1024}, GenerationLimits())  # LAVIS' name for it: not a way around the limit
    with pytest.raises(ValueError, match="num_beams x num_return_sequences = 256"):
        check_app_options({"num_beams": 16, "num_captions": 16}, GenerationLimits())
    assert check_app_options({"max_length": 8}, GenerationLimits()) == {"max_length": 8}  # passed on as given


def test_generate_kwargs_are_held_to_the_servers_limits_too(client):
    """PaddleMIX's `generate_kwargs` dict was passed on unchecked: 1024 new tokens or 64 x 64 beams over HTTP."""
    from pipelines.params import GenerationLimits
    from webui.appflow_io import check_app_options

    with pytest.raises(ValueError, match="max_new_tokens must be at most 256"):
        check_app_options({"generate_kwargs": {"max_length": 1024}}, GenerationLimits())
    with pytest.raises(ValueError, match="num_beams x num_return_sequences = 256"):
        check_app_options({"num_return_sequences": 16, "generate_kwargs": {"num_beams": 16}}, GenerationLimits())
    allowed = {"generate_kwargs": {"max_length": 8, "decode_strategy": "greedy_search"}}
    assert check_app_options(allowed, GenerationLimits()) == allowed  # passed on as given
    response = client.post("/appflow/image2text_generation", json={
        "inputs": {"image": _png_base64((1, 2, 3))}, "options": {"generate_kwargs": {"max_length": 1024}}})
    assert response.status_code == 422 and "at most 256" in response.text
    response = client.post("/appflow/image2text_generation", json={
        "inputs": {"image": _png_base64((1, 2, 3))}, "options": {"generate_kwargs": {"max_length": 3}}})
    assert response.status_code == 200, response.text


def test_a_transparent_mask_sent_over_http_repaints_only_its_strokes(client):
    """A1111's canvas mask (opaque strokes on a transparent layer) used to be flattened on white: all repainted."""
    from appflow import describe_app
    from webui.appflow_io import decode_app_inputs

    def b64(image):
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return base64.b64encode(buffer.getvalue()).decode()

    photo = Image.new("RGB", (64, 64), (0, 90, 200))
    mask = Image.new("RGBA", (64, 64), (0, 0, 0, 0))
    mask.paste((255, 255, 255, 255), (8, 8, 24, 20))
    inputs = {"image": b64(photo), "mask": b64(mask), "inpaint_prompt": "a cat"}
    response = client.post("/appflow/mask_guided_inpainting",
                           json={"inputs": inputs, "options": {"steps": 1, "seed": 5, "mask_blur": 0}})
    assert response.status_code == 200, response.text
    painted = np.asarray(Image.open(io.BytesIO(base64.b64decode(response.json()["outputs"]["image"]))).convert("RGB"))
    kept = np.ones((64, 64), bool)
    kept[8:20, 8:24] = False
    assert np.array_equal(painted[kept], np.asarray(photo)[kept])
    assert not np.array_equal(painted[~kept], np.asarray(photo)[~kept])
    decoded = decode_app_inputs(describe_app("mask_guided_inpainting"), inputs, max_pixels=10**6, max_bytes=10**6,
                                max_chars=100)
    assert decoded["mask"].mode == "RGBA" and decoded["image"].mode == "RGB"


def test_progress_shows_an_apps_sampling_steps_and_interrupt_stops_it_there(client, server):
    # The worker's step callback and control go through AppFlow to the app's SD pipeline (`appflow.progress`). The
    # real app runs; a wrapper holds it at step 2 of 4 so the test reads /sdapi/v1/progress there, no timing.
    import threading

    from appflow import Appflow

    state = server.state
    real = Appflow(app="text2image_generation", models={"generator": str(state.config.models[0])})
    reached, release = threading.Event(), threading.Event()

    def held_at_step_two(*, callback, control, **kwargs):
        def step(progress):
            callback(progress)
            if progress.step == 2:
                reached.set()
                release.wait(60)
        return real(callback=step, control=control, **kwargs)

    state._flows["text2image_generation"] = held_at_step_two
    try:
        job = state.submit_app("text2image_generation", {"prompt": "a lamp"}, {**OPTIONS, "steps": 4, "batch_count": 2})
        assert reached.wait(60)
        body = client.get("/sdapi/v1/progress", params={"skip_current_image": True}).json()
        assert body["state"]["sampling_step"] == 2 and body["state"]["sampling_steps"] == 4
        assert body["progress"] == 0.25 and body["eta_relative"] > 0  # step 2 of 4, batch 1 of 2
        assert body["textinfo"] == "Step 2/4, batch 1/2" and body["current_task"] == "appflow text2image_generation"
        assert state.worker.interrupt_job(job)
        release.set()
        outputs = job.future.result(60)
        assert len(outputs["images"]) == 1 and outputs.interrupted  # stopped in the first batch: the second never ran
    finally:
        release.set()
        state._flows.pop("text2image_generation", None)


def test_an_interrupted_app_answers_200_with_what_its_finished_steps_made(client, server):
    """Interrupt is not a failure (A1111's interrupted txt2img answers with the images it has): the route says
    `interrupted` and returns the outputs made before the stop, where it answered 503 "could not run" before."""
    from appflow import APPS, AppInterrupted
    from appflow.flow import AppResult

    state = server.state
    draft = Image.new("RGB", (8, 8), (1, 2, 3))

    def stopped_after_the_draft(*, callback, control, **kwargs):
        partial = AppResult(APPS.get("text2image_generation"), {"images": [draft]}, interrupted=True)
        raise AppInterrupted("App 'x' was interrupted before step 'refine'", partial=partial)

    state._flows["text2image_generation"] = stopped_after_the_draft
    try:
        response = client.post("/appflow/text2image_generation", json={"inputs": {"prompt": "a lamp"}})
    finally:
        state._flows.pop("text2image_generation", None)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["interrupted"] is True and list(body["outputs"]) == ["images"]
    image = Image.open(io.BytesIO(base64.b64decode(body["outputs"]["images"][0])))
    assert image.getpixel((0, 0)) == (1, 2, 3)
    finished = client.post("/appflow/text2image_generation", json={"inputs": {"prompt": "a lamp"}, "options": OPTIONS})
    assert finished.status_code == 200 and finished.json()["interrupted"] is False


@pytest.mark.parametrize("spec", ["/etc/passwd", "/etc/no-such-file", "../../etc/passwd:0.5", "C:/models/x.safetensors"])
def test_app_loras_are_names_from_the_lora_folder_never_paths(spec):
    from pipelines.params import GenerationLimits
    from webui.appflow_io import check_app_options

    names = {"ink", "styles/ink", "ink_v1"}
    with pytest.raises(ValueError) as raised:  # the same answer whether the file exists or not
        check_app_options({"loras": [spec]}, GenerationLimits(), names)
    assert "in the server's LoRA folder; available: ink, ink_v1, styles/ink. Name a LoRA from GET /sdapi/v1/loras, " \
           "never a file path." in str(raised.value)
    given = {"loras": ["ink:0.5", "styles/ink", "ink_v1:1:0.25"]}
    assert check_app_options(given, GenerationLimits(), names) == given
    with pytest.raises(ValueError, match="option loras: no LoRA named"):  # the spread of PaddleMIX's generate_kwargs
        check_app_options({"generate_kwargs": {"loras": [spec]}}, GenerationLimits(), names)


@pytest.mark.parametrize("app, options, fragment", [
    ("text2image_generation", {**OPTIONS, "sampler": "No such sampler"}, "No such sampler"),
    ("image2text_generation", {"top_k": "x"}, "top_k must be None or an integer"),
    ("image2text_generation", {"generate_kwargs": {"top_k": "x"}}, "top_k must be None or an integer"),
])
def test_an_apps_own_option_checks_refuse_before_anything_is_queued(client, server, monkeypatch, app, options,
                                                                  fragment):
    """A bad option value was queued and failed inside the job; now the app's checks answer 422 first."""
    def queued(*args, **kwargs):
        raise AssertionError("a request with a bad option was queued")

    monkeypatch.setattr(server.state, "submit_app", queued)
    inputs = {"prompt": "x"} if app == "text2image_generation" else {"image": _png_base64((1, 2, 3))}
    response = client.post(f"/appflow/{app}", json={"inputs": inputs, "options": options})
    assert response.status_code == 422 and fragment in response.text, response.text
