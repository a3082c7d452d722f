"""The server's ControlNet / IP-Adapter models between jobs: kept per file version (a file replaced under the same
name is loaded again), at most `control_net_model_cache_size` of them (sd-webui-controlnet's setting: the options
endpoint, the settings file, Settings > ControlNet), the least recently used evicted after a job, the models of the
new checkpoint's family kept across a switch and everything freed at unload-checkpoint. Loads are counted."""

from __future__ import annotations

import base64
import io
import json
import os
from types import SimpleNamespace

import gradio as gr
import httpx
import numpy as np
import pytest
import torch
from PIL import Image

from pipelines.unit_model_cache import CACHE_SIZE_KEY
from webui.controlnet_models import ControlNetModels

SD15_WIDTH, XL_WIDTH = 32, 64  # the tiny models' cross-attention widths


def touched(path) -> None:
    """A replacement within one clock tick still gets another modification time (every file of a folder)."""
    for file in [path] if path.is_file() else [file for file in path.iterdir() if file.is_file()]:
        stat = file.stat()
        os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))


@pytest.fixture(scope="module")
def unet(tiny_sd1_dir):
    from mixkit.models.diffusion.loading import load_diffusion_model

    return load_diffusion_model(tiny_sd1_dir).unet


@pytest.fixture
def counted_loads(monkeypatch):
    """Names of the ControlNets `load_controlnet` read, in order (the real loader runs)."""
    import pipelines.controlnet as controlnet

    loads, load = [], controlnet.load_controlnet

    def counted(path, **kwargs):
        loads.append(path.stem if path.is_file() else path.name)
        return load(path, **kwargs)

    monkeypatch.setattr(controlnet, "load_controlnet", counted)
    return loads


class FakeControlNet:
    """What `ControlNetModels.load` needs of a loaded ControlNet: its config (the family) and register_to_config."""

    def __init__(self, width: int) -> None:
        self.config = {"cross_attention_dim": width, "addition_embed_type": "text_time" if width == XL_WIDTH else None}

    def register_to_config(self, **values) -> None:
        self.config.update(values)


@pytest.fixture
def fake_loads(monkeypatch):
    """Names loaded through a fake `load_controlnet` reading the width from the folder's config.json."""
    import pipelines.controlnet as controlnet

    loads = []

    def fake(path, **kwargs):
        loads.append(path.name)
        return FakeControlNet(json.loads((path / "config.json").read_text())["cross_attention_dim"])

    monkeypatch.setattr(controlnet, "load_controlnet", fake)
    return loads


def fake_folder(root, **widths):
    """A ControlNet folder of diffusers-style subfolders holding only a config.json with the given width."""
    root.mkdir(parents=True, exist_ok=True)
    for name, width in widths.items():
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps({"cross_attention_dim": width}))
    return root


def test_a_controlnet_replaced_under_the_same_name_is_loaded_again(tmp_path, unet, counted_loads):
    from safetensors.torch import save_file

    from mixkit.testing.tiny_controlnet import build_tiny_controlnet, tiny_controlnet

    folder = tmp_path / "ControlNet"
    build_tiny_controlnet(folder / "canny", seed=1)
    save_file(tiny_controlnet(seed=1).state_dict(), folder / "edges.safetensors")
    models = ControlNetModels(folder)
    canny, edges = models.load("canny", unet), models.load("edges", unet)
    assert models.load("canny", unet) is canny and models.load("edges", unet) is edges
    assert counted_loads == ["canny", "edges"]
    build_tiny_controlnet(folder / "canny", seed=2)  # replaced in place, same names
    save_file(tiny_controlnet(seed=2).state_dict(), folder / "edges.safetensors")
    touched(folder / "canny")
    touched(folder / "edges.safetensors")
    new_canny, new_edges = models.load("canny", unet), models.load("edges", unet)
    assert counted_loads == ["canny", "edges", "canny", "edges"]
    for old, new in ((canny, new_canny), (edges, new_edges)):
        assert not all(torch.equal(a, b) for a, b in zip(old.state_dict().values(), new.state_dict().values()))
    assert len(models.cache) == 2  # the old versions are dropped, not kept beside the new ones
    assert new_canny.config._name_or_path == "canny"  # the infotext's name, not the path


def test_a_single_file_controlnet_is_kept_per_family_of_the_checkpoint_it_runs_with(tmp_path, unet, counted_loads):
    from safetensors.torch import save_file

    from mixkit.testing.tiny_controlnet import tiny_controlnet

    folder = tmp_path / "ControlNet"
    folder.mkdir()
    save_file(tiny_controlnet(seed=1).state_dict(), folder / "edges.safetensors")
    models = ControlNetModels(folder)
    models.load("edges", unet)
    twin = SimpleNamespace(config={**unet.config, "_name_or_path": "another SD 1.5 checkpoint"})
    models.load("edges", twin)  # the same derived config: the same model
    assert counted_loads == ["edges"]


def test_the_least_recently_used_controlnet_goes_first_and_a_job_is_never_robbed(tmp_path, fake_loads):
    models = ControlNetModels(fake_folder(tmp_path / "cn", a=SD15_WIDTH, b=SD15_WIDTH, c=SD15_WIDTH))
    assert models.cache.size == 2  # sd-webui-controlnet's default
    models.load("a", None)
    models.load("b", None)
    models.load("a", None)  # a is now more recent than b
    models.load("c", None)  # b goes
    models.load("a", None)
    assert fake_loads == ["a", "b", "c"]
    with models.cache.in_job():  # one job with all three: none evicted while it runs
        first = [models.load(name, None) for name in "abc"]
        assert [models.load(name, None) for name in "abc"] == first
    assert fake_loads == ["a", "b", "c", "b"] and len(models.cache) == 2
    with models.cache.in_job():  # the same job again reads only the one evicted after the last (a)
        [models.load(name, None) for name in "abc"]
    assert fake_loads == ["a", "b", "c", "b", "a"]


@pytest.fixture
def state(tmp_path, fake_loads):
    """A ServerState on fake checkpoints (two SD 1.5, one SDXL) with a fake ControlNet folder and a settings file."""
    from webui.config import ServerConfig
    from webui.model_switch import ModelHolder
    from webui.server_state import ServerState

    models = tmp_path / "models"
    models.mkdir()
    for name in ("sd15_a", "sd15_b", "xl"):
        (models / f"{name}.safetensors").write_bytes(name.encode())
    folder = fake_folder(tmp_path / "ControlNet", canny=SD15_WIDTH, depth=SD15_WIDTH, xl_canny=XL_WIDTH)
    state = ServerState(ServerConfig(models_dir=str(models), output_dir=str(tmp_path / "out"),
                                     settings_file=str(tmp_path / "settings.json"), controlnet_dir=str(folder)))

    def loader(source: str, preset: str):
        width = XL_WIDTH if source.endswith("xl.safetensors") else SD15_WIDTH
        unet = SimpleNamespace(config={"cross_attention_dim": width,
                                       "addition_embed_type": "text_time" if width == XL_WIDTH else None})
        model = SimpleNamespace(native_size=64, unet=unet, model_hash=source)
        return SimpleNamespace(model=model)

    state.holder = ModelHolder(state.catalog, loader=loader, memory_probe=lambda device: 10**12)
    state.switch_checkpoint("sd15_a.safetensors")
    yield state
    state.close()


ENCODER_KEY = ("ip-adapter image encoder", ("image_encoder",), "cpu", "torch.float32")


def test_a_switch_keeps_the_models_of_the_new_checkpoints_family_and_unload_frees_all(state, fake_loads):
    models = state.controlnets
    models.cache.resize(10)
    models.load("canny", None)
    models.load("depth", None)
    models.cache.put(ENCODER_KEY, "a CLIP image encoder")  # of no family: serves SD 1.5 and SDXL adapters
    state.switch_checkpoint("sd15_b.safetensors")  # the same family: nothing is read again
    models.load("canny", None)
    assert fake_loads == ["canny", "depth"] and len(models.cache) == 3
    state.switch_checkpoint("xl.safetensors")  # SD 1.5 ControlNets cannot run with it: freed
    assert models.cache.keys() == [ENCODER_KEY]
    models.load("xl_canny", None)
    state.switch_checkpoint("sd15_a.safetensors")
    assert models.cache.keys() == [ENCODER_KEY]
    models.load("canny", None)
    state.submit_unload().future.result(timeout=30)  # A1111's unload-checkpoint frees the unit models too
    assert len(models.cache) == 0 and state.holder.unloaded
    assert fake_loads == ["canny", "depth", "xl_canny", "canny"]


def test_the_cache_size_option_is_checked_applied_at_once_and_remembered(state, tmp_path):
    from webui.config import ServerConfig
    from webui.server_state import ServerState

    models = state.controlnets
    assert state.options_snapshot()[CACHE_SIZE_KEY] == 2 and models.cache.size == 2
    for name in ("canny", "depth"):
        models.load(name, None)
    with pytest.raises(ValueError, match=r"control_net_model_cache_size must be a whole number in \[0, 10\].*got 11"):
        state.options.check_update({CACHE_SIZE_KEY: 11})
    state.options.apply(state.options.check_update({CACHE_SIZE_KEY: 1}))
    assert models.cache.size == 1 and [key[1] for key in models.cache.keys()] == ["depth"]  # evicted now
    again = ServerState(ServerConfig(models_dir=str(tmp_path / "models"), output_dir=str(tmp_path / "out"),
                                     settings_file=str(tmp_path / "settings.json"),
                                     controlnet_dir=str(tmp_path / "ControlNet")))
    try:
        assert again.controlnets.cache.size == 1  # read from the settings file at start
    finally:
        again.close()


def test_the_settings_panel_sets_the_cache_size(state):
    from webui.ui.app import build_ui
    from .ui_blocks import component, handler

    blocks = build_ui(state)
    assert component(blocks, f"settings_{CACHE_SIZE_KEY}").value == 2
    state.controlnets.load("canny", None)
    apply = handler(blocks, "settings_apply_controlnet_cache", "click").fn
    assert apply(0.0) == "Settings applied. Loaded now: 0 of at most 0."
    assert state.controlnets.cache.size == 0 and state.options.get(CACHE_SIZE_KEY) == 0
    with pytest.raises(gr.Error, match=r"control_net_model_cache_size must be a whole number in \[0, 10\]"):
        apply(10.5)
    assert state.options.get(CACHE_SIZE_KEY) == 0


def test_the_options_endpoint_reports_and_checks_the_setting(client):
    assert client.get("/sdapi/v1/options").json()[CACHE_SIZE_KEY] == 2
    refused = client.post("/sdapi/v1/options", json={CACHE_SIZE_KEY: -1})
    assert refused.status_code == 422 and "control_net_model_cache_size must be a whole number" in refused.text
    try:
        assert client.post("/sdapi/v1/options", json={CACHE_SIZE_KEY: 5}).status_code == 200
        assert client.get("/sdapi/v1/options").json()[CACHE_SIZE_KEY] == 5
    finally:
        client.post("/sdapi/v1/options", json={CACHE_SIZE_KEY: 2})


@pytest.fixture(scope="module")
def server_with_units(tiny_sd1_dir, tmp_path_factory, serving):
    from mixkit.testing.tiny_controlnet import build_tiny_controlnet
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("unit-cache")
    for seed, name in enumerate(("canny", "depth", "lines"), start=1):
        build_tiny_controlnet(root / "ControlNet" / name, seed=seed)
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False,
                              controlnet_dir=str(root / "ControlNet"))) as running:
        yield running


def unit(model: str) -> dict:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), "white").save(buffer, format="PNG")
    return {"module": "none", "model": model, "image": base64.b64encode(buffer.getvalue()).decode(),
            "resize_mode": "Just Resize"}


def test_a_job_with_more_units_than_places_keeps_them_and_its_rerun_reads_one(server_with_units, counted_loads):
    server_with_units.state.controlnets.release()
    body = {"prompt": "x", "steps": 1, "width": 64, "height": 64, "sampler_name": "Euler", "seed": 3,
            "alwayson_scripts": {"controlnet": {"args": [unit("canny"), unit("depth"), unit("lines")]}}}
    images = []
    for _ in range(2):
        answer = httpx.post(f"{server_with_units.url}/sdapi/v1/txt2img", json=body, timeout=300)
        assert answer.status_code == 200, answer.text
        images.append(np.asarray(Image.open(io.BytesIO(base64.b64decode(answer.json()["images"][0])))))
    assert np.array_equal(images[0], images[1])
    assert counted_loads == ["canny", "depth", "lines", "canny"]  # the least recently used went after job one
    # job two used canny first: it is the least recently used of the three now
    assert [key[1] for key in server_with_units.state.controlnets.cache.keys()] == ["depth", "lines"]
