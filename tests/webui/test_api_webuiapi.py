"""Compatibility proven with a real A1111 client: the `webuiapi` package from PyPI, unchanged."""

from __future__ import annotations

import threading
import time

import pytest
from PIL import Image

webuiapi = pytest.importorskip("webuiapi", reason="test dependency webuiapi is not installed (pip install webuiapi)")


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("webuiapi")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False,
                              auth=("alice", "s3cret:with:colons"))) as running:
        yield running


@pytest.fixture()
def api(server):
    return webuiapi.WebUIApi(host="127.0.0.1", port=server.port, sampler="Euler", steps=1,
                             username="alice", password="s3cret:with:colons")


def test_txt2img_img2img_png_info(api):
    result = api.txt2img(prompt="a small house", negative_prompt="blurry", seed=42, width=64, height=64, cfg_scale=6)
    assert len(result.images) == 1 and result.image.size == (64, 64)
    infotext = result.info["infotexts"][0]
    assert result.info["all_seeds"] == [42]
    assert infotext.startswith("a small house\nNegative prompt: blurry\nSteps: 1, Sampler: Euler")
    assert result.image.info["parameters"] == infotext
    assert result.parameters["prompt"] == "a small house"

    again = api.img2img(images=[result.image], prompt="a small house at night", seed=7, width=64, height=64,
                        denoising_strength=0.6)
    assert again.image.size == (64, 64)
    assert "Denoising strength: 0.6" in again.info["infotexts"][0]

    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (0, 0, 32, 32))
    inpainted = api.img2img(images=[result.image], mask_image=mask, prompt="window", seed=7, width=64, height=64,
                            inpainting_fill=1, mask_blur=0)
    assert inpainted.image.convert("RGB").getpixel((50, 50)) == result.image.convert("RGB").getpixel((50, 50))

    read = api.png_info(result.image)
    assert read.info == infotext
    assert read.parameters["Prompt"] == "a small house" and read.parameters["Seed"] == "42"


def test_options_roundtrip(api, server):
    options = api.get_options()
    assert options["sd_model_checkpoint"] == server.state.model_title
    api.set_options({"CLIP_stop_at_last_layers": 2, "sd_model_checkpoint": server.state.model_title})
    assert api.get_options()["CLIP_stop_at_last_layers"] == 2
    api.set_options({"CLIP_stop_at_last_layers": 1})
    assert [m["title"] for m in api.get_sd_models()] == [server.state.model_title]
    assert "Euler a" in [s["name"] for s in api.get_samplers()]


def test_interrupt_and_progress(api):
    assert api.interrupt() == {"interrupted": False}
    outcome = {}
    runner = threading.Thread(target=lambda: outcome.update(result=api.txt2img(prompt="long", steps=300, width=64, height=64)))
    runner.start()
    deadline = time.monotonic() + 60
    while api.get_progress()["state"]["sampling_step"] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert api.interrupt() == {"interrupted": True}
    runner.join(60)
    assert outcome["result"].info["interrupted"] is True
    assert len(outcome["result"].images) == 1


def test_wrong_password_is_refused(server):
    with pytest.raises(RuntimeError) as failure:
        webuiapi.WebUIApi(host="127.0.0.1", port=server.port, username="alice", password="wrong").txt2img(prompt="x")
    assert failure.value.args[0] == 401


def test_whole_options_body_posted_back_with_one_key_changed(api):
    # The usual client pattern: get every option, change one, post them all back. The GET body holds keys the
    # server only reports (sd_checkpoint_hash, output folders); they must not make the POST fail.
    options = api.get_options()
    assert "sd_checkpoint_hash" in options
    default_steps = options["default_steps"]
    options["default_steps"] = default_steps + 3
    assert api.set_options(options) is None
    assert api.get_options()["default_steps"] == default_steps + 3
    api.set_options({"default_steps": default_steps})
