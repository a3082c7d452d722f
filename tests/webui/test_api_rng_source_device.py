"""RNG source GPU refused when the request arrives on a server whose model is not on the CPU (a 422 naming CPU and NV),
the device read from `ModelHolder.model_device` without loading a model. No GPU is needed: a torch.device("cuda")
is only a name until something is put on it, and a refused request puts nothing anywhere."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from pipelines.params import GenerationLimits
from webui.api_convert import RequestLimits, to_img2img_params, to_txt2img_params
from webui.api_requests import Img2ImgRequest, Txt2ImgRequest
from webui.checkpoints import CheckpointCatalog
from webui.model_switch import ModelHolder

SMALL = {"prompt": "a cube", "steps": 2, "width": 64, "height": 64, "sampler_name": "Euler a", "seed": 17}
GPU = {"override_settings": {"randn_source": "GPU"}}
FAKE_GPU = torch.device("cuda", 0)


def _refusing_loader(source, preset):
    raise AssertionError(f"a refused request loaded {source}")


def test_an_unloaded_holder_reports_the_device_a_load_would_use_without_loading():
    holder = ModelHolder(CheckpointCatalog([], None), device="cuda:0", loader=_refusing_loader)
    assert holder.model_device() == FAKE_GPU and not holder.loaded
    assert ModelHolder(CheckpointCatalog([], None), loader=_refusing_loader).model_device() == torch.device("cpu")


def test_a_loaded_holder_reports_its_models_device():
    # a loaded model's device wins over the configured one (an optimisation preset may have placed it)
    holder = ModelHolder.holding(SimpleNamespace(model=SimpleNamespace(device=FAKE_GPU)))
    assert holder.device is None and holder.model_device() == FAKE_GPU


@pytest.mark.parametrize("convert, extra", [(to_txt2img_params, {}), (to_img2img_params, {"init_images": ["x"]})])
def test_gpu_noise_off_the_cpu_is_refused_naming_the_sources_that_run(convert, extra):
    request_class = Img2ImgRequest if extra else Txt2ImgRequest
    kwargs = {"limits": GenerationLimits(), "lora_names": None, "model_device": FAKE_GPU}
    if extra:
        kwargs["request_limits"] = RequestLimits()
    with pytest.raises(ValueError) as refused:
        convert(request_class(**SMALL, **GPU, **extra), **kwargs)
    message = str(refused.value)
    assert message.startswith("randn_source='GPU' (override_settings, the infotext's RNG, or the server's Settings)")
    assert "(cuda:0)" in message and "choose CPU" in message and "or NV" in message


def test_gpu_noise_on_a_cpu_model_and_other_sources_off_it_are_accepted():
    def convert(fields, device):
        return to_txt2img_params(Txt2ImgRequest(**SMALL, **fields), limits=GenerationLimits(), lora_names=None,
                                 model_device=device)

    assert convert(GPU, torch.device("cpu")).rng_source == "GPU"  # the same numbers as CPU there
    assert convert({"override_settings": {"randn_source": "NV"}}, FAKE_GPU).rng_source == "NV"
    assert convert({}, FAKE_GPU).rng_source == "CPU"
    assert convert(GPU, None).rng_source == "GPU"  # no device given (a caller outside the server): the job checks


@pytest.fixture(scope="module")
def gpu_server(tiny_sd1_dir, tmp_path_factory, serving):
    """A server configured for a GPU (--device cuda:0) on a machine that may have none: a job would fail to load."""
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("gpu")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "out"), ui=False,
                              device="cuda:0"), load_model=False) as running:
        yield running


def test_the_http_api_refuses_gpu_noise_before_queueing_or_loading(gpu_server):
    import httpx

    with httpx.Client(base_url=gpu_server.url, timeout=60) as client:
        for path, extra in (("/sdapi/v1/txt2img", {}), ("/sdapi/v1/img2img", {"init_images": [_png()]})):
            response = client.post(path, json={**SMALL, **GPU, **extra})
            assert response.status_code == 422, response.text
            assert "randn_source='GPU'" in response.text and "choose CPU" in response.text
        try:  # the server's Settings value is refused the same way, per request
            assert client.post("/sdapi/v1/options", json={"randn_source": "GPU"}).status_code == 200
            response = client.post("/sdapi/v1/txt2img", json=SMALL)
            assert response.status_code == 422 and "or NV" in response.text
        finally:
            client.post("/sdapi/v1/options", json={"randn_source": "CPU"})
        progress = client.get("/sdapi/v1/progress").json()
    assert progress["state"]["job_count"] == 0
    assert not gpu_server.state.holder.loaded  # nothing was loaded onto the (fake) GPU


def _png() -> str:
    import base64
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), "red").save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()
