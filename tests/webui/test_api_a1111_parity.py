"""A1111 API behaviours a client relies on: `infotext` reproduces an image, `null` means "default", the legacy
firstphase size, the "None" hires upscaler, A1111's hires defaults, extras keeping metadata, the listing
endpoints, `override_settings_restore_afterwards` and `extra_generation_params`."""

from __future__ import annotations

import base64
import io
import os
import json

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from pipelines.params import GenerationLimits
from webui.api_convert import to_txt2img_params
from webui.api_requests import Txt2ImgRequest

SMALL = {"steps": 2, "width": 64, "height": 64, "cfg_scale": 5.0}


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("parity")
    (root / "vae").mkdir()
    (root / "vae" / "kl-f8.safetensors").write_bytes(b"")  # listed only; never loaded here
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False, queue_size=4,
                          vae_dir=str(root / "vae"))
    with serving(config) as running:
        yield running


def decode_png(data: str) -> Image.Image:
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    image.load()
    return image


def generate(client, **body) -> tuple[list[Image.Image], dict, dict]:
    response = client.post("/sdapi/v1/txt2img", json=body)
    assert response.status_code == 200, response.text
    payload = response.json()
    return [decode_png(data) for data in payload["images"]], json.loads(payload["info"]), payload["parameters"]


def _params(**fields):
    return to_txt2img_params(Txt2ImgRequest(**fields), limits=GenerationLimits(), lora_names=None)


def test_posting_an_images_infotext_reproduces_it_and_sent_fields_win(client):
    images, info, _ = generate(client, prompt="a red circle", negative_prompt="blurry", seed=123, steps=3,
                               width=64, height=72, sampler_name="DPM++ 2M", scheduler="Karras", cfg_scale=6.5)
    infotext = images[0].info["parameters"]
    again, again_info, parameters = generate(client, infotext=infotext)
    assert again[0].tobytes() == images[0].tobytes()
    assert again_info["infotexts"] == info["infotexts"]
    assert (parameters["prompt"], parameters["seed"], parameters["width"], parameters["height"]) == \
        ("a red circle", 123, 64, 72)
    # A field the request sends wins over the infotext's.
    _, other, parameters = generate(client, infotext=infotext, seed=124)
    assert other["seed"] == 124 and parameters["steps"] == 3 and other["sampler_name"] == "DPM++ 2M"


def test_an_infotext_value_of_the_wrong_type_is_refused_naming_the_key(client):
    response = client.post("/sdapi/v1/txt2img", json={"infotext": "a cat\nSteps: many, Sampler: Euler, CFG scale: 7"})
    assert response.status_code == 422
    assert response.json()["detail"] == ("infotext: Steps: 'many' is not a valid steps; fix the infotext or send "
                                         "steps in the request.")


def test_an_infotext_with_a_hires_recipe_turns_hires_fix_on():
    from webui.api_infotext import apply_infotext

    text = ("a cat\nSteps: 4, Sampler: Euler, Schedule type: Automatic, CFG scale: 7, Seed: 5, Size: 64x48, "
            "Denoising strength: 0.5, Hires upscale: 1.5, Hires upscaler: Lanczos, Clip skip: 2")
    request = apply_infotext(Txt2ImgRequest(infotext=text))
    assert (request.enable_hr, request.hr_scale, request.hr_upscaler, request.denoising_strength) == \
        (True, 1.5, "Lanczos", 0.5)
    assert request.override_settings == {"CLIP_stop_at_last_layers": 2}
    assert apply_infotext(Txt2ImgRequest(infotext=text, enable_hr=False)).enable_hr is False


def test_null_fields_get_their_defaults():
    request = Txt2ImgRequest(seed=None, sampler_index=None, subseed=None, cfg_scale=None, steps=None, batch_size=None,
                             n_iter=None, hr_scale=None, send_images=None, enable_hr=None, negative_prompt=None)
    assert (request.seed, request.sampler_index, request.cfg_scale, request.steps, request.send_images) == \
        (-1, "Euler", 7.0, 50, True)
    assert request.model_fields_set == set()  # null counts as left out: Settings defaults apply


def test_firstphase_size_runs_the_first_pass_and_hires_scales_from_it(client):
    params = _params(enable_hr=True, width=64, height=48, firstphase_width=32, firstphase_height=40, **{"steps": 2})
    assert (params.width, params.height) == (32, 40)
    with pytest.raises(ValueError, match="firstphase_width and firstphase_height must be set together .* got 32x0"):
        _params(enable_hr=True, firstphase_width=32)
    images, info, _ = generate(client, prompt="x", seed=5, steps=2, width=64, height=48, enable_hr=True,
                               firstphase_width=32, firstphase_height=32)
    assert images[0].size == (64, 64) and "Size: 32x32," in info["infotexts"][0]


def test_hires_upscaler_none_is_a_lanczos_resize(client):
    body = dict(prompt="x", seed=3, enable_hr=True, hr_scale=1.5, denoising_strength=0.5, **SMALL)
    none, info, _ = generate(client, hr_upscaler="None", **body)
    lanczos, _, _ = generate(client, hr_upscaler="Lanczos", **body)
    assert none[0].tobytes() == lanczos[0].tobytes()
    assert "Hires upscaler: None" in info["infotexts"][0]


def test_hires_without_denoising_strength_or_upscaler_uses_a1111s_api_defaults(client):
    _, info, _ = generate(client, prompt="x", seed=3, enable_hr=True, **SMALL)
    assert info["denoising_strength"] == 0.75
    assert info["extra_generation_params"] == {"Denoising strength": 0.75, "Hires upscale": 2}
    assert "Hires upscaler" not in info["infotexts"][0]
    _, info, _ = generate(client, prompt="x", seed=3, enable_hr=True, hr_upscaler="Latent", hr_second_pass_steps=1,
                          denoising_strength=0.7, **SMALL)
    assert info["extra_generation_params"] == {"Denoising strength": 0.7, "Hires upscale": 2, "Hires steps": 1,
                                               "Hires upscaler": "Latent"}


def test_img2img_extra_generation_params(client):
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 30, 30)).save(buffer, format="PNG")
    response = client.post("/sdapi/v1/img2img", json={"init_images": [base64.b64encode(buffer.getvalue()).decode()],
                                                      "prompt": "x", "seed": 1, "denoising_strength": 0.6, **SMALL})
    assert response.status_code == 200, response.text
    assert json.loads(response.json()["info"])["extra_generation_params"] == {"Denoising strength": 0.6}


def test_extras_keep_the_source_metadata_and_add_postprocessing(client):
    chunks = PngInfo()
    chunks.add_text("parameters", "a cat\nSteps: 20, Seed: 1, Size: 30x20")
    chunks.add_text("notes", "kept")
    buffer = io.BytesIO()
    Image.new("RGB", (30, 20), (10, 20, 30)).save(buffer, format="PNG", pnginfo=chunks)
    data = base64.b64encode(buffer.getvalue()).decode()
    response = client.post("/sdapi/v1/extra-single-image", json={"image": data, "upscaling_resize": 2,
                                                                 "upscaler_1": "Lanczos"})
    assert response.status_code == 200, response.text
    text = "Postprocess upscale by: 2.0, Postprocess upscaler: Lanczos"
    assert response.json()["html_info"] == f"<p>{text}</p>"
    result = decode_png(response.json()["image"])
    assert result.size == (56, 40)  # A1111's Upscaler.upscale floors each side to a multiple of 8: 60 -> 56
    assert result.info == {"parameters": "a cat\nSteps: 20, Seed: 1, Size: 30x20", "notes": "kept", "postprocessing": text}
    response = client.post("/sdapi/v1/extra-single-image", json={"image": data, "upscaler_1": "None"})
    assert response.json()["html_info"] == "<p></p>"
    assert decode_png(response.json()["image"]).info["parameters"] == "a cat\nSteps: 20, Seed: 1, Size: 30x20"


def test_listing_endpoints_answer_in_a1111_shapes(client, server):
    from pipelines.hires import LATENT_UPSCALERS

    vaes = client.get("/sdapi/v1/sd-vae").json()
    assert [item["model_name"] for item in vaes] == ["kl-f8.safetensors"] and vaes[0]["filename"].endswith("kl-f8.safetensors")
    assert client.post("/sdapi/v1/refresh-vae").status_code == 200
    assert client.get("/sdapi/v1/latent-upscale-modes").json() == [{"name": name} for name in LATENT_UPSCALERS.names()]
    flags = client.get("/sdapi/v1/cmd-flags").json()
    assert flags["api"] is True and flags["listen"] is False and "auth" not in flags  # never the credentials
    memory = client.get("/sdapi/v1/memory").json()
    assert memory["ram"]["total"] > memory["ram"]["used"] > 0 and set(memory) == {"ram", "cuda"}
    for name in ("prompt-styles", "face-restorers", "hypernetworks", "realesrgan-models", "extensions"):
        assert client.get(f"/sdapi/v1/{name}").json() == [], name


def test_sd_modules_is_empty(client):
    assert client.get("/sdapi/v1/sd-modules").json() == []  # A1111's route; no separate module files here


def test_paths_are_absolute_and_cmd_flags_hold_a1111s_flag_names(client, server):
    models = client.get("/sdapi/v1/sd-models").json()
    assert [os.path.isabs(item["filename"]) for item in models] == [True]
    flags = client.get("/sdapi/v1/cmd-flags").json()
    assert (flags["styles_file"], flags["cors_allow_origins"]) == ([], None)  # A1111's values without the flags
    assert os.path.isabs(flags["output_dir"])


def test_sd_vae_none_is_the_checkpoints_own_vae(client):
    assert client.post("/sdapi/v1/options", json={"sd_vae": "None"}).status_code == 200
    assert client.get("/sdapi/v1/options").json()["sd_vae"] == "None"
    _, info, _ = generate(client, prompt="x", seed=1, **SMALL)
    assert info["sd_vae_name"] is None
    assert client.post("/sdapi/v1/options", json={"sd_vae": "Automatic"}).status_code == 200


def test_override_settings_stay_when_not_restored_afterwards(client):
    body = dict(prompt="x", seed=1, override_settings={"CLIP_stop_at_last_layers": 2}, **SMALL)
    generate(client, **body)
    assert client.get("/sdapi/v1/options").json()["CLIP_stop_at_last_layers"] == 1
    generate(client, **body, override_settings_restore_afterwards=False)
    try:
        assert client.get("/sdapi/v1/options").json()["CLIP_stop_at_last_layers"] == 2
    finally:
        client.post("/sdapi/v1/options", json={"CLIP_stop_at_last_layers": 1})


def test_webuiapi_helpers_reach_every_listing(server):
    webuiapi = pytest.importorskip("webuiapi", reason="test dependency webuiapi is not installed (pip install webuiapi)")
    api = webuiapi.WebUIApi(host="127.0.0.1", port=server.port)
    assert [vae["model_name"] for vae in api.get_sd_vae()] == ["kl-f8.safetensors"]
    assert api.get_latent_upscale_modes()[0] == {"name": "Latent"}
    assert api.get_cmd_flags()["api"] is True
    for helper in (api.get_prompt_styles, api.get_face_restorers, api.get_hypernetworks, api.get_realesrgan_models):
        assert helper() == [], helper.__name__


def test_eta_is_applied_recorded_and_read_back_from_an_infotext(client):
    body = dict(prompt="a red circle", seed=11, sampler_name="Euler a", **SMALL)
    default, _, _ = generate(client, **body, eta=1.0)  # webuiapi's default: Euler a as it always runs
    plain, info, _ = generate(client, **body, eta=0)  # A1111's /docs example: Euler a without noise
    assert "Eta: 0" in info["infotexts"][0] and plain[0].tobytes() != default[0].tobytes()
    again, _, _ = generate(client, infotext=plain[0].info["parameters"])
    assert again[0].tobytes() == plain[0].tobytes()
    unchanged, info, _ = generate(client, **{**body, "sampler_name": "DPM++ 2M"}, eta=0)  # no eta there: ignored
    assert "Eta" not in info["infotexts"][0]


def test_an_sde_sampler_runs_the_requested_eta_and_a_bad_one_is_a_422(client):
    _, info, _ = generate(client, prompt="x", sampler_name="DPM++ SDE", eta=0.5, **SMALL)
    assert "Eta: 0.5" in info["infotexts"][0]
    response = client.post("/sdapi/v1/txt2img", json=dict(prompt="x", sampler_name="DPM++ SDE", eta=1.5, **SMALL))
    assert response.status_code == 422 and "eta must be a number in [0, 1]" in response.text


def test_an_infotext_or_override_naming_another_vae_is_refused_not_ignored(client):
    # A1111 pastes the infotext's VAE into override_settings.sd_vae; a request cannot switch it here, so a VAE other
    # than the running one is a 422 naming what to do, and the running one (or "Automatic") is accepted.
    text = "x\nSteps: 2, Sampler: Euler, CFG scale: 5, Seed: 1, Size: 64x64, VAE: kl-f8.safetensors, RNG: CPU"
    response = client.post("/sdapi/v1/txt2img", json={"infotext": text})
    assert response.status_code == 422 and "sd_vae='kl-f8.safetensors'" in response.text
    assert "POST /sdapi/v1/options" in response.text
    response = client.post("/sdapi/v1/txt2img", json=dict(prompt="x", override_settings={"sd_vae": "kl-f8"}, **SMALL))
    assert response.status_code == 422
    generate(client, prompt="x", override_settings={"sd_vae": "Automatic"}, **SMALL)


def test_the_loaded_model_may_be_named_by_its_infotext_hash_and_info_names_it_as_a1111(client):
    images, info, _ = generate(client, prompt="x", seed=1, **SMALL)
    model_hash = info["sd_model_hash"]
    assert model_hash and f"Model hash: {model_hash}" in info["infotexts"][0]
    generate(client, prompt="x", override_settings={"sd_model_checkpoint": model_hash}, **SMALL)
    model = images[0].info["parameters"].split("Model: ")[1].split(",")[0]
    assert info["sd_model_name"] == model  # A1111's name_for_extra, the infotext's "Model", not the title
