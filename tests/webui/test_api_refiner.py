"""`refiner_checkpoint` / `refiner_switch_at` in /sdapi/v1/txt2img and img2img, and pasted from an infotext: found
among the server's checkpoints by any title A1111 accepts, "", "None" and "none" meaning none, 422 for the rest."""

from __future__ import annotations

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
