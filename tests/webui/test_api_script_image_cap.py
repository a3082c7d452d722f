"""The server's cap on the images one script job generates (`--max-script-images`): every selectable script's request
over it is a 422 naming the count, the cap and the flag, before anything is queued (pipelines/scripts/image_budget.py
through webui/api_selectable_scripts.py's script context)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from PIL import Image

from webui.base64_images import encode_png_base64

PICTURE = encode_png_base64(Image.fromarray(np.random.default_rng(3).integers(0, 256, (48, 48, 3), dtype=np.uint8)))
TINY = {"prompt": "a cat", "steps": 1, "seed": 3, "sampler_name": "Euler", "width": 64, "height": 64}
IMG2IMG = {**TINY, "init_images": [PICTURE], "denoising_strength": 0.5}
CAP = 6

# (kind, request fields) of each script's job of 8 images, and what the error says the 8 are made of
JOBS_OF_8 = {
    "X/Y/Z plot": ("txt2img", {"batch_size": 2, "n_iter": 2, "script_args": [4, "1,2", []]},
                   "2 cells x their batch size x batch count"),
    "Prompt matrix": ("txt2img", {"prompt": "a cat|red|blue|big", "script_args": []},
                      "one per combination of the '|' parts: 8"),
    "Prompts from file or textbox": ("txt2img", {"batch_size": 4, "script_args": [False, False, "start", "a\nb"]},
                                     "2 lines x each line's batch size x batch count"),
    "Loopback": ("img2img", {**IMG2IMG, "n_iter": 2, "script_args": [4, 0.5, "Linear", "None"]},
                 "4 loops x batch count 2"),
    "SD upscale": ("img2img", {**IMG2IMG, "n_iter": 2, "script_args": [None, 8, 0, 2]},
                   "4 tiles of the 96x96 upscale x batch count 2"),
}


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    """An API server whose script jobs may generate at most 6 images each."""
    from pipelines.params import GenerationLimits
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("api-script-cap")
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False,
                          limits=GenerationLimits(max_script_images=CAP))
    with serving(config) as running:
        yield running


@pytest.fixture
def submitted(server, monkeypatch):
    """The descriptions of the jobs queued during the test."""
    worker = server.state.worker
    queued, submit = [], worker.submit
    # an instance entry of its own, removed afterwards (monkeypatch.setattr would leave the bound method behind)
    monkeypatch.setitem(worker.__dict__, "submit",
                        lambda function, description, **kwargs: queued.append(description) or submit(
                            function, description, **kwargs))
    return queued


@pytest.mark.parametrize("name", list(JOBS_OF_8))
def test_a_script_job_over_the_servers_cap_is_a_422_before_queueing(client, submitted, name):
    kind, fields, made_of = JOBS_OF_8[name]
    if name == "SD upscale":  # its upscaler by the listed index: Lanczos
        names = [entry["name"] for entry in client.get("/sdapi/v1/upscalers").json()]
        fields = {**fields, "script_args": [None, 8, names.index("Lanczos"), 2]}
    response = client.post(f"/sdapi/v1/{kind}", json={**TINY, **fields, "script_name": name})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert f"would generate 8 images ({made_of}), more than the {CAP} one script job may make" in detail
    assert "--max-script-images N (on `mixkit webui` for a server" in detail
    assert submitted == []


def test_a_script_job_at_the_cap_runs(client, submitted):
    response = client.post("/sdapi/v1/txt2img", json={**TINY, "batch_size": 3, "script_name": "Prompts from file or "
                                                      "textbox", "script_args": [False, False, "start", "a\nb"]})
    assert response.status_code == 200, response.text
    assert len(response.json()["images"]) == CAP and len(submitted) == 1


def parse(argv: list[str]) -> argparse.Namespace:
    from webui.cli import webui as webui_cli

    parser = argparse.ArgumentParser(prog="mixkit")
    webui_cli.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["webui", *argv])


def test_the_flag_sets_the_servers_cap_and_refuses_a_cap_below_one(tmp_path):
    from webui.cli.webui import config_from_args

    assert config_from_args(parse(["--model", str(tmp_path)])).limits.max_script_images == 10_000
    raised = config_from_args(parse(["--model", str(tmp_path), "--max-script-images", "50000"]))
    assert raised.limits.max_script_images == 50_000
    with pytest.raises(ValueError, match=r"^--max-script-images must be a whole number of images of at least 1, "
                                         r"got 0\.$"):
        config_from_args(parse(["--model", str(tmp_path), "--max-script-images", "0"]))
