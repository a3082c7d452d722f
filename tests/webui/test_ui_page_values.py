"""The Settings values a page starts from are in the page Gradio serves, not set by a page-load event afterwards
(`webui.ui.page_values`): an event landing after the form is editable replaced what the user had typed."""

from __future__ import annotations

import httpx
import pytest


@pytest.fixture(scope="module")
def ui_server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("page-values")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "out"))) as running:
        yield running


def served_props(config: dict, elem_id: str) -> dict:
    (entry,) = [entry for entry in config["components"] if entry["props"].get("elem_id") == elem_id]
    return entry["props"]


def test_a_page_served_after_a_settings_change_holds_the_new_values(ui_server):
    state = ui_server.state
    changed = {"default_steps": 13, "default_sampler_name": "LMS", "default_cfg_scale": 4.5,
               "CLIP_stop_at_last_layers": 3, "eta_ddim": 0.25}
    before = {key: state.options.get(key) for key in changed}
    state.options.apply(state.options.check_update(changed))
    try:
        with httpx.Client(base_url=ui_server.url, timeout=60) as http:
            config = http.get("/config").json()
            page = http.get("/").text
    finally:
        state.options.apply(before)
    for kind in ("txt2img", "img2img"):
        assert served_props(config, f"{kind}_steps")["value"] == 13
        assert served_props(config, f"{kind}_sampler")["value"] == "LMS"
        assert served_props(config, f"{kind}_cfg_scale")["value"] == 4.5
        assert served_props(config, f"{kind}_clip_skip")["value"] == 3
    assert served_props(config, "settings_default_steps")["value"] == 13
    assert served_props(config, "settings_eta_ddim")["value"] == 0.25
    assert '"elem_id":"txt2img_steps"' in page.replace(" ", "")  # the HTML embeds the same config
    checkpoint = served_props(config, "settings_checkpoint")  # the loaded model's title, hashed once loaded
    assert checkpoint["value"] == state.model_title and [state.model_title] * 2 in checkpoint["choices"]


def test_no_page_load_event_sets_a_settings_value(ui_server):
    config = httpx.get(ui_server.url + "/config", timeout=60).json()
    load_outputs = {output for dependency in config["dependencies"]
                    if any(event == "load" for _, event in dependency["targets"]) for output in dependency["outputs"]}
    for elem_id in ("txt2img_steps", "txt2img_sampler", "img2img_width", "txt2img_clip_skip", "settings_default_steps",
                    "settings_eta_ancestral", "settings_status", "settings_checkpoint"):
        (entry,) = [entry for entry in config["components"] if entry["props"].get("elem_id") == elem_id]
        assert entry["id"] not in load_outputs, elem_id
