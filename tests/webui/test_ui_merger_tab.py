"""The Checkpoint Merger tab: A1111's controls, a merge queued and followed, the new file in every checkpoint list."""

from __future__ import annotations

import json
import shutil

import gradio as gr
import httpx
import pytest
import torch
from safetensors.torch import load_file, save_file

from .ui_blocks import component, handler

FORM_DEFAULTS = dict(method="Weighted sum", multiplier=0.3, save_as_half=False, custom_name="",
                     checkpoint_format="safetensors", config_source="A, B or C", bake_in_vae="None",
                     discard_weights="", save_metadata=True, add_merge_recipe=True, copy_metadata=True,
                     metadata_json="{}")


@pytest.fixture
def built(single_file_checkpoints, tmp_path, monkeypatch):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "cache"))
    models = tmp_path / "models"
    models.mkdir()
    for name in ("sd1", "other"):
        shutil.copy(single_file_checkpoints / f"{name}.safetensors", models)
    vaes = tmp_path / "vae"
    vaes.mkdir()
    first_stage = {key.removeprefix("first_stage_model."): value * 0 + 0.5
                   for key, value in load_file(models / "sd1.safetensors").items() if key.startswith("first_stage_model.")}
    save_file(first_stage, vaes / "half.safetensors")
    save_file({"decoder.conv_in.bias": torch.zeros(5)}, vaes / "wrong.safetensors")  # another architecture's shape
    state = ServerState(ServerConfig(models_dir=str(models), output_dir=str(tmp_path / "out"), vae_dir=str(vaes)))
    try:
        yield state, build_ui(state), models
    finally:
        state.close()


def run_merge(blocks, a, b=None, c=None, **changes):
    form = {**FORM_DEFAULTS, **changes}
    merge = handler(blocks, "modelmerger_merge", "click").fn
    return list(merge(a, b, c, *form.values()))


def test_controls_have_a1111_defaults(built):
    _, blocks, _ = built
    assert component(blocks, "modelmerger_interp_amount").value == 0.3
    assert component(blocks, "modelmerger_interp_method").value == "Weighted sum"
    assert component(blocks, "modelmerger_checkpoint_format").value == "safetensors"
    assert [value for value, _ in component(blocks, "modelmerger_bake_in_vae").choices] == [
        "None", "half.safetensors", "wrong.safetensors"]
    assert component(blocks, "modelmerger_primary_model_name").choices == [("other.safetensors", "other.safetensors"),
                                                                           ("sd1.safetensors", "sd1.safetensors")]


def test_merge_runs_in_the_queue_and_the_new_file_is_listed(built, serving):
    state, blocks, models = built
    outputs = run_merge(blocks, "sd1.safetensors", "other.safetensors", save_as_half=True,
                        bake_in_vae="half.safetensors", metadata_json='{"author": "me"}')
    progress, text, *boxes = outputs[-1]
    assert "Checkpoint saved" in progress and text == "Checkpoint saved to 0.7(sd1) + 0.3(other).safetensors"
    written = models / "0.7(sd1) + 0.3(other).safetensors"
    merged = load_file(written)
    assert merged["first_stage_model.decoder.conv_in.bias"].unique().tolist() == [0.5]
    assert merged["first_stage_model.decoder.conv_in.bias"].dtype.is_floating_point
    assert str(merged["model.diffusion_model.out.2.weight"].dtype) == "torch.float16"
    from mixkit.io.hashing import sha256_file

    titles = [f"{name} [{sha256_file(models / name)[:10]}]" for name in
              (written.name, "other.safetensors", "sd1.safetensors")]
    assert boxes[0]["choices"] == titles and boxes[0]["value"] == titles[2]  # hashed now, the choice kept
    from mixkit.io.safetensors_header import read_safetensors_metadata

    recipe = json.loads(read_safetensors_metadata(written)["sd_merge_recipe"])
    assert recipe["bake_in_vae"] == "half.safetensors" and recipe["save_as_half"] is True
    with serving(state, load_model=False) as running:
        listed = httpx.get(f"{running.url}/sdapi/v1/sd-models", timeout=30).json()
    assert "0.7(sd1) + 0.3(other)" in [item["model_name"] for item in listed]


def test_form_mistakes_are_refused_before_queueing(built):
    state, blocks, models = built
    with pytest.raises(gr.Error, match="requires a tertiary model"):
        run_merge(blocks, "sd1.safetensors", "other.safetensors", method="Add difference")
    with pytest.raises(gr.Error, match="not valid JSON"):
        run_merge(blocks, "sd1.safetensors", "other.safetensors", metadata_json="{")
    with pytest.raises(gr.Error, match="Unknown checkpoint 'nope'"):
        run_merge(blocks, "nope", "other.safetensors")
    assert sorted(path.name for path in models.iterdir()) == ["other.safetensors", "sd1.safetensors"]
    assert state.worker.queued == 0


def test_a_failed_merge_shows_the_error_and_writes_nothing(built):
    _, blocks, models = built
    save_file({"model.diffusion_model.out.2.weight": torch.zeros(1)}, models / "tiny.safetensors")
    blocks_state = handler(blocks, "modelmerger_refresh_checkpoints", "click").fn
    blocks_state(None, None, None)
    progress, text, *_ = run_merge(blocks, "sd1.safetensors", "tiny.safetensors")[-1]
    assert "Merge failed" in progress and "Cannot merge key 'model.diffusion_model.out.2.weight'" in text
    assert not any("0.7" in path.name for path in models.iterdir())


def test_read_metadata_merges_the_selected_files(built):
    _, blocks, models = built
    save_file(load_file(models / "sd1.safetensors"), models / "meta.safetensors", metadata={"ss_x": "1"})
    handler(blocks, "modelmerger_refresh_checkpoints", "click").fn(None, None, None)
    read = handler(blocks, "modelmerger_read_metadata", "click").fn
    assert json.loads(read("meta.safetensors", "other.safetensors", None)) == {"ss_x": "1", "format": "pt"}  # A, then B


def test_a_failure_inside_the_job_names_no_server_path(built, tmp_path):
    _, blocks, models = built
    progress, text, *_ = run_merge(blocks, "sd1.safetensors", "other.safetensors", bake_in_vae="wrong.safetensors")[-1]
    assert "Merge failed" in progress and "decoder.conv_in.bias" in text and "another architecture" in text
    assert str(tmp_path) not in text and "VAE file 'wrong.safetensors'" in text  # named as the VAE list names it
    assert sorted(path.name for path in models.iterdir()) == ["other.safetensors", "sd1.safetensors"]


def test_a_page_merges_through_gradio(built, serving):
    """End to end through the served app: the form's values as the browser sends them, the file written and listed."""
    from gradio_client import Client

    state, _, models = built
    with serving(state, load_model=False) as running:
        client = Client(running.url + "/", verbose=False)
        _, text, *_ = client.predict("sd1.safetensors", "other.safetensors", None, *FORM_DEFAULTS.values(),
                                     api_name="/modelmerger")
        listed = httpx.get(f"{running.url}/sdapi/v1/sd-models", timeout=30).json()
    assert text == "Checkpoint saved to 0.7(sd1) + 0.3(other).safetensors"
    assert "0.7(sd1) + 0.3(other)" in [item["model_name"] for item in listed]
