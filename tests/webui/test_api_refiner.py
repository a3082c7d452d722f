"""`refiner_checkpoint` / `refiner_switch_at` in /sdapi/v1/txt2img and img2img, and pasted from an infotext: found
among the server's checkpoints by any title A1111 accepts, "", "None" and "none" meaning none, 422 for the rest."""

from __future__ import annotations

import json

import pytest

from pipelines.params import GenerationLimits
from webui.api_convert import to_txt2img_params
from webui.api_infotext import apply_infotext
from webui.api_requests import Txt2ImgRequest
from webui.checkpoints import CheckpointCatalog

BASE = "a red circle\nSteps: 2, Sampler: Euler, CFG scale: 7, Seed: 1, Size: 64x64, Model: tiny"


@pytest.fixture
def catalog(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    (models / "sd_xl_refiner_1.0.safetensors").write_bytes(b"weights")
    (models / "sd_xl_base_1.0.safetensors").write_bytes(b"weights")
    return CheckpointCatalog(models_dir=models)


def _convert(request: Txt2ImgRequest, catalog=None):
    return to_txt2img_params(request, limits=GenerationLimits(), lora_names=None, refiner_catalog=catalog)


@pytest.mark.parametrize("name", ["sd_xl_refiner_1.0", "sd_xl_refiner_1.0.safetensors",
                                  "sd_xl_refiner_1.0 [7440042bbd]"])  # a title with a hash this server has not seen
def test_the_refiner_is_found_by_its_titles(catalog, name):
    params = _convert(Txt2ImgRequest(prompt="a", steps=2, refiner_checkpoint=name), catalog)
    assert params.refiner == str(catalog.models_dir / "sd_xl_refiner_1.0.safetensors")
    assert params.refiner_switch_at == 0.8  # A1111's default when the request names none


def test_switch_at_from_the_request(catalog):
    params = _convert(Txt2ImgRequest(prompt="a", refiner_checkpoint="sd_xl_refiner_1.0", refiner_switch_at=0.6),
                      catalog)
    assert params.refiner_switch_at == 0.6


@pytest.mark.parametrize("none", [None, "", "None", "none"])
def test_a1111s_no_refiner_spellings_mean_none(catalog, none):
    params = _convert(Txt2ImgRequest(prompt="a", steps=2, refiner_checkpoint=none, refiner_switch_at=0.5), catalog)
    assert params.refiner is None
    assert params.refiner_switch_at == 0.5  # kept, as A1111 keeps it: a plot's Refiner checkpoint axis switches there


@pytest.mark.parametrize("value", [0, 1])
def test_switch_at_without_a_refiner_is_unused_and_not_refused(catalog, value):
    """A1111 ignores refiner_switch_at when no refiner is set; clients that send 0 or 1 then are not refused."""
    params = _convert(Txt2ImgRequest(prompt="a", steps=2, refiner_switch_at=value), catalog)
    assert (params.refiner, params.refiner_switch_at) == (None, value)


def test_an_unknown_refiner_is_refused_listing_the_checkpoints(catalog):
    with pytest.raises(ValueError, match=r"refiner_checkpoint='xl_refiner': Unknown checkpoint 'xl_refiner'; "
                                         r"available: sd_xl_base_1.0.safetensors, sd_xl_refiner_1.0.safetensors"):
        _convert(Txt2ImgRequest(prompt="a", refiner_checkpoint="xl_refiner"), catalog)
    with pytest.raises(ValueError, match="no checkpoint list"):
        _convert(Txt2ImgRequest(prompt="a", refiner_checkpoint="xl_refiner"), None)


@pytest.mark.parametrize("value", [0, 1, 1.5])
def test_switch_at_outside_the_open_interval_is_refused(catalog, value):
    with pytest.raises(ValueError, match=r"refiner_switch_at must be a number strictly between 0 and 1.*got "
                                         + str(value)):
        _convert(Txt2ImgRequest(prompt="a", refiner_checkpoint="sd_xl_refiner_1.0", refiner_switch_at=value), catalog)


def test_a_pasted_infotext_sets_the_refiner(catalog):
    request = apply_infotext(Txt2ImgRequest(infotext=BASE + ", Refiner: sd_xl_refiner_1.0 [7440042bbd], "
                                                             "Refiner switch at: 0.7"))
    assert (request.refiner_checkpoint, request.refiner_switch_at) == ("sd_xl_refiner_1.0 [7440042bbd]", 0.7)
    params = _convert(request, catalog)
    assert params.refiner.endswith("sd_xl_refiner_1.0.safetensors") and params.refiner_switch_at == 0.7
    with pytest.raises(ValueError, match="refiner_checkpoint='other'"):
        _convert(apply_infotext(Txt2ImgRequest(infotext=BASE + ", Refiner: other, Refiner switch at: 0.8")), catalog)


def test_hires_params_keep_the_refiner(catalog):
    request = Txt2ImgRequest(prompt="a", steps=2, enable_hr=True, hr_scale=2, refiner_checkpoint="sd_xl_refiner_1.0",
                             refiner_switch_at=0.6)
    params = _convert(request, catalog)
    assert type(params).__name__ == "HiresParams" and params.refiner_switch_at == 0.6 and params.refiner


@pytest.fixture(scope="module")
def refiner_server(tiny_sdxl_dir, tiny_sdxl_refiner_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("api-refiner")
    config = ServerConfig(models=[str(tiny_sdxl_dir), str(tiny_sdxl_refiner_dir)], output_dir=str(root / "outputs"),
                          ui=False, queue_size=4)
    with serving(config) as running:
        yield running


def test_txt2img_with_a_refiner_over_http(refiner_server, tiny_sdxl_refiner_dir):
    import httpx

    payload = {"prompt": "a red cube", "seed": 3, "steps": 4, "width": 64, "height": 64, "sampler_name": "Euler"}
    with httpx.Client(base_url=refiner_server.url, timeout=120) as http:
        plain = http.post("/sdapi/v1/txt2img", json=payload)
        refined = http.post("/sdapi/v1/txt2img", json={**payload, "refiner_checkpoint": tiny_sdxl_refiner_dir.name,
                                                       "refiner_switch_at": 0.6})
        unknown = http.post("/sdapi/v1/txt2img", json={**payload, "refiner_checkpoint": "nope"})
        bad_switch = http.post("/sdapi/v1/txt2img", json={**payload, "refiner_checkpoint": tiny_sdxl_refiner_dir.name,
                                                          "refiner_switch_at": 1})
        assert plain.status_code == 200 and refined.status_code == 200, refined.text
        infotext = json.loads(refined.json()["info"])["infotexts"][0]
        assert f"Refiner: {tiny_sdxl_refiner_dir.name} [" in infotext and "Refiner switch at: 0.6" in infotext
        assert refined.json()["images"][0] != plain.json()["images"][0]
        # the infotext pasted back makes the same image
        again = http.post("/sdapi/v1/txt2img", json={"infotext": infotext})
        assert again.status_code == 200, again.text
        assert again.json()["images"][0] == refined.json()["images"][0]
        # the PNG carries it: png-info reads A1111's keys back (as A1111's parameters: the written strings), and its
        # info pasted as a request's infotext sets refiner_checkpoint / refiner_switch_at and makes the same image
        read = http.post("/sdapi/v1/png-info", json={"image": refined.json()["images"][0]})
        assert read.status_code == 200 and read.json()["info"] == infotext, read.text
        parameters = read.json()["parameters"]
        refiner_hash = infotext.split(f"Refiner: {tiny_sdxl_refiner_dir.name} [", 1)[1][:10]
        assert (parameters["Refiner"], parameters["Refiner switch at"]) == (
            f"{tiny_sdxl_refiner_dir.name} [{refiner_hash}]", "0.6")
        pasted = apply_infotext(Txt2ImgRequest(infotext=read.json()["info"]))
        assert (pasted.refiner_checkpoint, pasted.refiner_switch_at) == (parameters["Refiner"], 0.6)
        from_png = http.post("/sdapi/v1/txt2img", json={"infotext": read.json()["info"]})
        assert from_png.json()["images"][0] == refined.json()["images"][0]
        unrefined = http.post("/sdapi/v1/png-info", json={"image": plain.json()["images"][0]}).json()["parameters"]
        assert "Refiner" not in unrefined and "Refiner switch at" not in unrefined
    assert unknown.status_code == 422 and "refiner_checkpoint='nope': Unknown checkpoint 'nope'" in unknown.text
    assert tiny_sdxl_refiner_dir.name in unknown.text
    assert bad_switch.status_code == 422
    assert "refiner_switch_at must be a number strictly between 0 and 1" in bad_switch.text


def test_hires_refiner_first_pass_over_http_and_its_infotext_reproduces_the_image(refiner_server,
                                                                                  tiny_sdxl_refiner_dir):
    import httpx

    payload = {"prompt": "a red cube", "seed": 3, "steps": 4, "width": 64, "height": 64, "sampler_name": "Euler",
               "enable_hr": True, "hr_scale": 1.5, "denoising_strength": 0.5,
               "refiner_checkpoint": tiny_sdxl_refiner_dir.name, "refiner_switch_at": 0.8}
    with httpx.Client(base_url=refiner_server.url, timeout=300) as http:
        default = http.post("/sdapi/v1/txt2img", json=payload)
        first = http.post("/sdapi/v1/txt2img",
                          json={**payload, "override_settings": {"hires_fix_refiner_pass": "first pass"}})
        assert default.status_code == 200 and first.status_code == 200, first.text
        infotext = json.loads(first.json()["info"])["infotexts"][0]
        assert "Hires refiner: first pass" in infotext and f"Refiner: {tiny_sdxl_refiner_dir.name} [" in infotext
        assert "Hires refiner" not in json.loads(default.json()["info"])["infotexts"][0]
        assert first.json()["images"][0] != default.json()["images"][0]
        again = http.post("/sdapi/v1/txt2img", json={"infotext": infotext})
        assert again.status_code == 200, again.text
        assert again.json()["images"][0] == first.json()["images"][0]


@pytest.mark.parametrize("written, runs", [("", "second pass"), (", Hires refiner: second pass", "second pass"),
                                           (", Hires refiner: first pass", "first pass"),
                                           (", Hires refiner: both passes", "both passes")])
def test_a_pasted_hires_refiner_sets_the_pass_the_refiner_finishes(catalog, written, runs):
    """A1111's paste turns "Hires refiner" into override_settings.hires_fix_refiner_pass; no key: its default."""
    hires = BASE + ", Denoising strength: 0.5, Hires upscale: 2, Refiner: sd_xl_refiner_1.0, Refiner switch at: 0.8"
    params = _convert(apply_infotext(Txt2ImgRequest(infotext=hires + written)), catalog)
    assert params.refiner and params.hr_scale == 2 and params.hires_fix_refiner_pass == runs


def test_hires_fix_refiner_pass_from_override_settings_then_settings(catalog):
    request = dict(prompt="a", steps=2, enable_hr=True, refiner_checkpoint="sd_xl_refiner_1.0")
    settings = {"hires_fix_refiner_pass": "both passes"}
    convert = lambda body, options=None: to_txt2img_params(  # noqa: E731
        Txt2ImgRequest(**body), limits=GenerationLimits(), lora_names=None, refiner_catalog=catalog,
        sampler_options=options)
    assert convert(request).hires_fix_refiner_pass == "second pass"  # A1111's default
    assert convert(request, settings).hires_fix_refiner_pass == "both passes"
    overridden = convert({**request, "override_settings": {"hires_fix_refiner_pass": "first pass"}}, settings)
    assert overridden.hires_fix_refiner_pass == "first pass"
    with pytest.raises(ValueError, match=r"hires_fix_refiner_pass must be one of 'first pass', 'second pass', "
                                         r"'both passes' .*got 'third pass'"):
        convert({**request, "override_settings": {"hires_fix_refiner_pass": "third pass"}})


def test_refiner_switch_by_sample_steps_from_settings_override_settings_and_a_paste(catalog):
    """A1111's Settings > Compatibility option: Settings, then override_settings, where its paste puts the
    infotext's "Refiner switch by sampling steps"; a value that is no bool is refused naming the option."""
    request = dict(prompt="a", steps=2, refiner_checkpoint="sd_xl_refiner_1.0")
    convert = lambda body, options=None: to_txt2img_params(  # noqa: E731
        Txt2ImgRequest(**body), limits=GenerationLimits(), lora_names=None, refiner_catalog=catalog,
        sampler_options=options)
    assert convert(request).refiner_switch_by_sample_steps is False  # A1111's default: by noise level
    assert convert(request, {"refiner_switch_by_sample_steps": True}).refiner_switch_by_sample_steps is True
    overridden = convert({**request, "override_settings": {"refiner_switch_by_sample_steps": False}},
                         {"refiner_switch_by_sample_steps": True})
    assert overridden.refiner_switch_by_sample_steps is False
    pasted = apply_infotext(Txt2ImgRequest(infotext=BASE + ", Refiner: sd_xl_refiner_1.0, Refiner switch at: 0.8, "
                                                           "Refiner switch by sampling steps: True"))
    assert pasted.override_settings["refiner_switch_by_sample_steps"] is True
    assert _convert(pasted, catalog).refiner_switch_by_sample_steps is True
    with pytest.raises(TypeError, match="refiner_switch_by_sample_steps must be True or False"):
        convert({**request, "override_settings": {"refiner_switch_by_sample_steps": "yes"}})
