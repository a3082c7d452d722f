"""Settings -> SD VAE: swapping the decoder of the loaded checkpoint, keeping the old one on failure."""

from __future__ import annotations

import gradio as gr
import numpy as np
import pytest

from mixkit.errors import UnknownNameError
from pipelines.params import Txt2ImgParams
from webui.ui.settings_tab import switch_vae

PARAMS = Txt2ImgParams(prompt="a cube", steps=1, width=32, height=32, seed=11, sampler="Euler")


def vae_server(model_dir, root, **config):
    """A server on `model_dir` with a `--vae-dir` holding "other-vae" (the tiny VAE of another seed); `root/vaes` may
    hold more before the call. The initial model is loaded."""
    from mixkit.testing.tiny_models import tiny_vae
    from webui.config import ServerConfig
    from webui.server_state import ServerState

    vae_dir = root / "vaes"
    vae_dir.mkdir(exist_ok=True)
    tiny_vae(seed=7).save_pretrained(vae_dir / "other-vae")
    server = ServerState(ServerConfig(models=[str(model_dir)], output_dir=str(root / "out"), ui=False,
                                      vae_dir=str(vae_dir), **config))
    server.load_initial_model()
    return server


@pytest.fixture(scope="module")
def state(tiny_sd1_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("vae")
    (root / "vaes").mkdir()
    (root / "vaes" / "broken.safetensors").write_bytes(b"not a safetensors file")
    (root / "vaes" / "notes.txt").write_text("ignored")
    server = vae_server(tiny_sd1_dir, root)
    yield server
    server.close()


def generate(state):
    outcome = state.submit_generation("txt2img", PARAMS, save=False).future.result(120)
    return np.asarray(outcome.result.images[0], dtype=np.int16), outcome.result.infotexts[0]


def test_vae_switch_failure_and_back_to_automatic(state):
    assert state.vaes.names() == ["Automatic", "broken.safetensors", "other-vae"]
    model = state.holder.txt2img().model
    own_vae = model.vae
    own_image, own_text = generate(state)
    assert "VAE: " not in own_text

    assert switch_vae(state, "other-vae").endswith("VAE: **other-vae**")
    assert model.vae is not own_vae and state.options_snapshot()["sd_vae"] == "other-vae"
    other_image, other_text = generate(state)
    assert np.abs(other_image - own_image).max() > 0  # a different decoder decodes the same latents differently
    assert "VAE: other-vae" in other_text
    swapped = model.vae

    with pytest.raises(gr.Error, match=r"broken\.safetensors.*Still using 'other-vae'"):
        switch_vae(state, "broken.safetensors")
    assert model.vae is swapped and state.options.get("sd_vae") == "other-vae"

    switch_vae(state, "Automatic")
    assert model.vae is own_vae and state.options.get("sd_vae") == "Automatic"
    back_image, back_text = generate(state)
    assert np.array_equal(back_image, own_image) and "VAE: " not in back_text


def test_unknown_vae_is_refused_before_queueing(state):
    with pytest.raises(UnknownNameError, match="Automatic, broken.safetensors, other-vae"):
        state.submit_vae_switch("../other-vae")
    with pytest.raises(gr.Error, match="Choose a VAE"):
        switch_vae(state, "")


def test_reloading_the_checkpoint_keeps_the_chosen_vae(state):
    switch_vae(state, "other-vae")
    state.holder.entry = None  # force a real reload of the same checkpoint
    state.submit_model_switch(state.catalog.titles()[0]).future.result(120)
    try:
        assert state.holder.vae_name == "other-vae" and state.options.get("sd_vae") == "other-vae"
        assert "VAE: other-vae" in generate(state)[1]
    finally:
        switch_vae(state, "Automatic")


def test_missing_vae_dir_is_named(tmp_path):
    from mixkit.errors import ModelNotFoundError
    from webui.vae_catalog import VaeCatalog

    with pytest.raises(ModelNotFoundError, match="--vae-dir .*nope"):
        VaeCatalog(str(tmp_path / "nope"))
    assert VaeCatalog(None).names() == ["Automatic"]


def test_sd_vae_over_the_options_api(state, serving):
    """A1111 clients switch the VAE with POST /sdapi/v1/options {"sd_vae": name}."""
    import httpx

    with serving(state, load_model=False) as running, httpx.Client(base_url=running.url, timeout=120) as http:
        assert http.post("/sdapi/v1/options", json={"sd_vae": "other-vae"}).status_code == 200
        assert http.get("/sdapi/v1/options").json()["sd_vae"] == "other-vae"
        unknown = http.post("/sdapi/v1/options", json={"sd_vae": "../../etc/passwd"})
        assert unknown.status_code == 422 and "Automatic" in unknown.text
        broken = http.post("/sdapi/v1/options", json={"sd_vae": "broken.safetensors"})
        assert broken.status_code == 422 and "still using 'other-vae'" in broken.text
        assert http.post("/sdapi/v1/options", json={"sd_vae": "Automatic"}).status_code == 200
        assert http.get("/sdapi/v1/options").json()["sd_vae"] == "Automatic"
        assert http.get("/sdapi/v1/embeddings").status_code == 200


def test_a_restarted_server_comes_back_with_the_checkpoint_and_vae_last_chosen(tiny_sd1_dir, tmp_path):
    # A1111 restarts with the last checkpoint and VAE; the settings file used to keep only the preset.
    import json
    import shutil

    from mixkit.testing.tiny_models import tiny_vae
    from webui.config import ServerConfig
    from webui.server_state import ServerState

    models = tmp_path / "models"
    models.mkdir()
    for name in ("first", "second"):
        shutil.copytree(tiny_sd1_dir, models / name)
    (tmp_path / "vaes").mkdir()
    tiny_vae(seed=7).save_pretrained(tmp_path / "vaes" / "other-vae")
    config = ServerConfig(models_dir=str(models), output_dir=str(tmp_path / "out"), ui=False, vae_dir=str(tmp_path / "vaes"),
                          settings_file=str(tmp_path / "settings.json"))
    server = ServerState(config)
    try:
        server.load_initial_model()
        assert server.model_title == "first"
        server.submit_model_switch("second").future.result(120)
        server.submit_vae_switch("other-vae").future.result(120)
    finally:
        server.close()
    saved = json.loads((tmp_path / "settings.json").read_text())
    assert (saved["sd_model_checkpoint"], saved["sd_vae"]) == ("second", "other-vae")
    again = ServerState(config)
    try:
        again.load_initial_model()
        assert (again.model_title, again.holder.vae_name) == ("second", "other-vae")
    finally:
        again.close()
    shutil.rmtree(models / "second")  # a remembered checkpoint that is gone: the first one, with a warning
    last = ServerState(config)
    try:
        last.load_initial_model()
        assert last.model_title == "first"
    finally:
        last.close()


def test_a_vae_chosen_while_the_checkpoint_is_unloaded_goes_on_it_when_it_loads_again(tiny_sd1_dir, tmp_path):
    """After unload-checkpoint there is no VAE to swap: the choice is kept, and the reload (or next job) applies it."""
    state = vae_server(tiny_sd1_dir, tmp_path)
    try:
        state.submit_unload().future.result(60)
        assert state.submit_vae_switch("other-vae").future.result(60) == "other-vae"
        assert state.holder.unloaded and state.options.get("sd_vae") == "other-vae"
        state.submit_reload().future.result(120)
        assert state.holder.vae_name == "other-vae"
        assert state.holder.txt2img().model.extras["vae_name"] == "other-vae"
    finally:
        state.close()
