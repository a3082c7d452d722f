"""The ControlNet folder: model families read without loading, and units of another family refused before a job is
queued, over HTTP (422) and from the UI (a refusal naming the unit), with nothing loaded or run."""

from __future__ import annotations

import base64
import io
from types import SimpleNamespace

import httpx
import pytest
from PIL import Image


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from safetensors.torch import save_file

    from mixkit.testing.tiny_controlnet import build_tiny_controlnet, tiny_controlnet
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("controlnet-family")
    build_tiny_controlnet(root / "controlnets" / "tiny_canny", seed=1)
    build_tiny_controlnet(root / "controlnets" / "xl_canny", seed=1, sdxl=True)
    save_file(tiny_controlnet(seed=2, sdxl=True).state_dict(), root / "controlnets" / "xl_file.safetensors")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False,
                              controlnet_dir=str(root / "controlnets"))) as running:
        yield running


def b64(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def request(*units) -> dict:
    return {"prompt": "x", "steps": 1, "width": 64, "height": 64, "sampler_name": "Euler",
            "alwayson_scripts": {"controlnet": {"args": list(units)}}}


@pytest.mark.parametrize("model", ["xl_canny", "xl_file"])
def test_http_refuses_a_controlnet_of_another_family_before_queueing(server, model):
    picture = b64(Image.new("RGB", (64, 64), "white"))
    units = [{"enabled": False, "model": "tiny_canny"}, {"model": "tiny_canny", "image": picture},
             {"model": model, "image": picture}]
    answer = httpx.post(f"{server.url}/sdapi/v1/txt2img", json=request(*units), timeout=120)
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert (f"controlnet unit 2: ControlNet '{model}' is made for SDXL-like (cross-attention width 64) models, but the "
            "checkpoint") in detail
    assert "is SD-like (cross-attention width 32); pick a ControlNet made for" in detail
    loaded = [key[1] for key in server.state.controlnets.cache.keys() if key[0] == "controlnet"]
    assert model not in loaded  # refused before the worker loaded anything


def test_ui_refuses_a_controlnet_of_another_family_naming_the_unit(server):
    from pipelines.params import Txt2ImgParams
    from webui.ui.controlnet_units import with_controlnet

    defaults = ("Crop and Resize", "Balanced", False, 512.0, -1.0, -1.0, None, None)
    unit = [True, Image.new("RGB", (64, 64)), "none", "xl_canny", 1.0, 0.0, 1.0, *defaults]
    off = [False, None, "none", None, 1.0, 0.0, 1.0, *defaults]
    params = with_controlnet(server.state, "txt2img", Txt2ImgParams(prompt="x", steps=1, width=64, height=64),
                             off + unit)
    with pytest.raises(ValueError, match=r"^ControlNet Unit 1: ControlNet 'xl_canny' is made for SDXL-like"):
        server.state.submit_generation("txt2img", params, save=False)


def test_a_matching_unit_still_runs(server):
    picture = b64(Image.new("RGB", (64, 64), "white"))
    answer = httpx.post(f"{server.url}/sdapi/v1/txt2img", json=request({"model": "tiny_canny", "image": picture}),
                        timeout=120)
    assert answer.status_code == 200, answer.text


def test_checkpoint_family_reads_another_checkpoint_from_disk(tiny_sdxl_dir, tiny_sd1_dir):
    from pipelines.controlnet.family import ModelFamily
    from webui.controlnet_models import checkpoint_family

    entry = SimpleNamespace(source=str(tiny_sdxl_dir), title="xl")
    unloaded = SimpleNamespace(entry=SimpleNamespace(source=str(tiny_sd1_dir), title="sd1"), loaded=False, loaded_model=lambda: None)
    assert checkpoint_family(unloaded, entry) == (ModelFamily(64, True), "xl")  # a request's own checkpoint
    assert checkpoint_family(unloaded) == (ModelFamily(32, False), "sd1")  # the server's, unloaded: read from disk
    assert checkpoint_family(SimpleNamespace(entry=None, loaded=False, loaded_model=lambda: None)) is None


def test_checkpoint_family_of_single_files(single_file_checkpoints):
    from pipelines.controlnet.family import ModelFamily
    from webui.controlnet_models import checkpoint_family

    holder = SimpleNamespace(entry=None, loaded=False, loaded_model=lambda: None)
    sd1 = SimpleNamespace(source=str(single_file_checkpoints / "sd1.safetensors"), title="sd1.safetensors")
    broken = SimpleNamespace(source=str(single_file_checkpoints / "broken.safetensors"), title="broken")
    assert checkpoint_family(holder, sd1) == (ModelFamily(32, False), "sd1.safetensors")  # from its header
    assert checkpoint_family(holder, broken) is None  # left to the job, which reports the failed load


def test_checkpoint_family_of_pickled_checkpoints_and_hub_ids(single_file_checkpoints, tmp_path, monkeypatch,
                                                              tiny_sdxl_dir):
    """A `.ckpt` of either torch.save format is read onto the meta device (weights only, no storage kept), a Hugging
    Face id from the hub cache only."""
    import json

    import torch
    from safetensors.torch import load_file

    from mixkit.testing.tiny_hub_cache import write_hub_cache_entry
    from pipelines.controlnet.family import ModelFamily
    from webui.controlnet_models import checkpoint_family

    state = load_file(single_file_checkpoints / "sd1.safetensors")
    torch.save({"state_dict": state}, tmp_path / "sd1.ckpt")
    torch.save({"state_dict": state}, tmp_path / "legacy.ckpt", _use_new_zipfile_serialization=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    unet_config = json.loads((tiny_sdxl_dir / "unet" / "config.json").read_text())
    write_hub_cache_entry(tmp_path / "hub", "org/tiny-xl", {"unet/config.json": unet_config})
    holder = SimpleNamespace(entry=None, loaded=False, loaded_model=lambda: None)

    def family(source):
        return checkpoint_family(holder, SimpleNamespace(source=source, title="t"))

    assert family(str(tmp_path / "sd1.ckpt")) == (ModelFamily(32, False), "t")
    assert family(str(tmp_path / "legacy.ckpt")) == (ModelFamily(32, False), "t")  # was left to the job's check
    assert family("org/tiny-xl") == (ModelFamily(64, True), "t")
    assert family("org/not-downloaded") is None


@pytest.mark.parametrize("width", [[], 1e400, {"a": 1}])
def test_a_cached_checkpoint_config_with_a_broken_width_is_left_to_the_job(tmp_path, monkeypatch, width):
    # before: IndexError / OverflowError / TypeError escaped checkpoint_family, a 500 for every ControlNet request
    from mixkit.testing.tiny_hub_cache import write_hub_cache_entry
    from webui.controlnet_models import checkpoint_family

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    write_hub_cache_entry(tmp_path, "org/odd", {"unet/config.json": {"cross_attention_dim": width}})
    holder = SimpleNamespace(entry=None, loaded=False, loaded_model=lambda: None)
    assert checkpoint_family(holder, SimpleNamespace(source="org/odd", title="t")) is None
