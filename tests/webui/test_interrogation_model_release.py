"""Settings > Interrogate's keep-in-memory off (A1111's default) frees the interrogation models when the job ends:
the caption app's model (it stayed in AppFlow's cache for the life of the server) and the CLIP, each checked by a
weak reference to the very object loaded; turning the setting off frees what a kept job left loaded at once, not at the
next interrogation (webui/interrogation_captioner.py, `HeldBetweenUses.release`)."""

from __future__ import annotations

import gc
import weakref

import pytest

from mixkit.data.shapes_render import render_scene
from mixkit.data.shapes_vocab import Scene, ShapeSpec

from .test_api_interrogate import png_base64

KEEP = "interrogate_keep_models_in_memory"


@pytest.fixture(scope="module")
def circle():
    return render_scene(Scene((ShapeSpec("circle", "red", "large", "center"),), "blue"), 64)


@pytest.fixture(scope="module")
def running(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig
    from webui.server_state import ServerState

    state = ServerState(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path_factory.mktemp("out")),
                                     ui=False))
    with serving(state, load_model=False) as server:
        yield server, state


@pytest.fixture
def loaded(monkeypatch):
    """Weak references to every caption model (mixkit-tiny-blip2, through AppFlow's cache) and CLIP
    (mixkit-tiny-clip) `load_vlm` loads during the test. The caption model an earlier test left in AppFlow's
    process-wide cache is dropped first, so this test sees its own load."""
    import mixkit.models.vlm as vlm
    from appflow import release_models

    release_models("mixkit-tiny-blip2")

    refs = {"caption": [], "clip": []}
    real_load = vlm.load_vlm

    def load_vlm(source, *args, **kwargs):
        model = real_load(source, *args, **kwargs)
        refs["caption" if "blip2" in str(source) else "clip"].append(weakref.ref(model))
        return model

    monkeypatch.setattr(vlm, "load_vlm", load_vlm)
    return refs


def alive(refs: dict) -> dict:
    gc.collect()
    return {kind: sum(ref() is not None for ref in found) for kind, found in refs.items()}


def set_options(http, **values):
    response = http.post("/sdapi/v1/options", json=values)
    assert response.status_code == 200, response.text


@pytest.fixture
def http(running):
    import httpx

    server, state = running
    with httpx.Client(base_url=server.url, timeout=120) as client:
        yield client
        set_options(client, **{KEEP: False})


def test_keep_off_frees_the_caption_model_and_the_clip_when_the_job_ends(http, running, loaded, circle):
    _, state = running
    response = http.post("/sdapi/v1/interrogate", json={"image": png_base64(circle)})
    assert response.status_code == 200, response.text
    assert len(loaded["caption"]) == len(loaded["clip"]) == 1  # both were loaded for the job
    assert alive(loaded) == {"caption": 0, "clip": 0}
    assert state.interrogator._clip is None


def test_keep_on_holds_them_and_turning_it_off_frees_them_without_another_interrogation(http, running, loaded,
                                                                                        circle):
    set_options(http, **{KEEP: True})
    for _ in range(2):
        assert http.post("/sdapi/v1/interrogate", json={"image": png_base64(circle)}).status_code == 200
    assert len(loaded["caption"]) == len(loaded["clip"]) == 1  # one load each, kept for the second
    assert alive(loaded) == {"caption": 1, "clip": 1}
    set_options(http, **{KEEP: False})
    assert alive(loaded) == {"caption": 0, "clip": 0}


def test_the_settings_tab_turning_it_off_frees_them_too(http, running, loaded, circle):
    from webui.ui.settings_tab import apply_settings

    _, state = running
    set_options(http, **{KEEP: True})
    assert http.post("/sdapi/v1/interrogate", json={"image": png_base64(circle)}).status_code == 200
    assert alive(loaded) == {"caption": 1, "clip": 1}
    apply_settings(state, {KEEP: True, "interrogate_return_ranks": False})  # the form sends every field: kept on
    assert alive(loaded) == {"caption": 1, "clip": 1}
    apply_settings(state, {KEEP: False, "interrogate_return_ranks": False})
    assert alive(loaded) == {"caption": 0, "clip": 0}


def test_a_job_holding_them_loads_each_once_and_frees_them_at_its_end(running, loaded, circle):
    """Loopback's interrogation at every loop: `interrogation_models_held` around the job."""
    from webui.interrogation import interrogate_now, interrogation_models_held

    _, state = running
    with interrogation_models_held(state):
        first = interrogate_now(state, circle)
        assert interrogate_now(state, circle) == first
        assert len(loaded["caption"]) == len(loaded["clip"]) == 1 and alive(loaded) == {"caption": 1, "clip": 1}
    assert alive(loaded) == {"caption": 0, "clip": 0}
