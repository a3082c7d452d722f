"""The UI built from Settings: initial values from the sampler defaults, N ControlNet units, the session-end handler."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from PIL import Image

from pipelines.params import Txt2ImgParams
from webui.ui.controlnet_units import UNIT_FIELDS, with_controlnet

from .ui_blocks import component, page_value
from .worker_jobs import submit_until_interrupted


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A UI over a server state that has a ControlNet folder and a settings file (no model is loaded: none is needed)."""
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-settings")
    (root / "models").mkdir()
    (root / "controlnets" / "canny_model").mkdir(parents=True)
    (root / "controlnets" / "canny_model" / "config.json").write_text("{}")
    (root / "config.json").write_text(json.dumps({"control_net_unit_count": 2, "default_steps": 7,
                                                  "default_sampler_name": "Heun", "default_width": 320}))
    state = ServerState(ServerConfig(models_dir=str(root / "models"), output_dir=str(root / "out"),
                                     controlnet_dir=str(root / "controlnets"), settings_file=str(root / "config.json")))
    blocks = build_ui(state)
    yield state, blocks
    state.close()


def test_forms_start_from_the_settings_defaults_and_follow_later_changes(built):
    state, blocks = built
    for kind in ("txt2img", "img2img"):
        assert component(blocks, f"{kind}_steps").value == 7 and component(blocks, f"{kind}_sampler").value == "Heun"
        assert component(blocks, f"{kind}_width").value == 320 and component(blocks, f"{kind}_height").value == 512
    assert component(blocks, "settings_default_steps").value == 7
    assert component(blocks, "settings_performance_preset").value == "exact"
    state.options.apply(state.options.check_update({"default_steps": 11, "default_sampler_name": "LMS"}))
    assert page_value(blocks, "txt2img_steps") == 11 and page_value(blocks, "img2img_sampler") == "LMS"
    assert page_value(blocks, "settings_default_steps") == 11


def test_control_net_unit_count_decides_the_units_per_tab(built):
    _, blocks = built
    ids = {getattr(block, "elem_id", None) for block in blocks.blocks.values()}
    for kind in ("txt2img", "img2img"):
        assert {f"{kind}_controlnet_0_enable", f"{kind}_controlnet_1_enable", f"{kind}_controlnet_1_model"} <= ids
        assert f"{kind}_controlnet_2_enable" not in ids


def test_closing_the_tab_runs_the_session_end_handler(built):
    state, blocks = built
    (unload,) = [f for f in blocks.fns.values() if any(t[1] == "unload" for t in f.targets)]
    running, _ = submit_until_interrupted(state.worker, session="tab-1")
    queued = state.worker.submit(lambda control, on_step: "never", "txt2img", session="tab-1")
    unload.fn(SimpleNamespace(session_hash="tab-1"))
    assert queued.future.cancelled() and running.future.result(10) == "interrupted"


def unit(enabled, image, model="canny_model", preprocessor="canny", weight=1.0, start=0.0, end=1.0) -> list:
    values = [enabled, image, preprocessor, model, weight, start, end, "Crop and Resize", "Balanced", False, 512.0, -1.0,
              -1.0, None, None]
    assert len(values) == len(UNIT_FIELDS)
    return values


def test_enabled_units_become_a_list_in_unit_order(tmp_path):
    from webui.controlnet_models import ControlNetModels

    for name in ("canny_model", "depth_model"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    state = SimpleNamespace(controlnets=ControlNetModels(tmp_path))
    image = Image.new("RGB", (8, 8))
    params = Txt2ImgParams(prompt="x")
    values = unit(True, image, weight=0.5) + unit(False, None) + unit(True, image, model="depth_model", preprocessor="none",
                                                                     start=0.2)
    controlled = with_controlnet(state, "txt2img", params, values)
    assert [(s.model_name, s.preprocessor, s.weight, s.guidance_start) for s in controlled.controlnets] == \
        [("canny_model", "canny", 0.5, 0.0), ("depth_model", "none", 1.0, 0.2)]
    assert with_controlnet(state, "txt2img", params, unit(False, image) * 3) is params
    with pytest.raises(ValueError, match="ControlNet Unit 2 needs a control image"):
        with_controlnet(state, "txt2img", params, unit(True, image) + unit(False, None) + unit(True, None))
    with pytest.raises(ValueError, match="ControlNet Unit 1: Unknown ControlNet model"):
        with_controlnet(state, "txt2img", params, unit(True, image) + unit(True, image, model="../etc"))
    with pytest.raises(ValueError, match="15 values per ControlNet unit"):
        with_controlnet(state, "txt2img", params, unit(True, image)[:-1])


def test_the_grid_options_are_settings_like_a1111s(built):
    # A1111: return_grid ("Show grid in gallery") and grid_save ("Always save all generated image grids"), both on.
    from .ui_blocks import handler

    state, blocks = built
    assert component(blocks, "settings_return_grid").value is True and component(blocks, "settings_grid_save").value
    apply = handler(blocks, "settings_apply", "click")
    keys = ("default_sampler_name", "default_scheduler", "default_steps", "default_cfg_scale", "default_width",
            "default_height")
    current = [True, False, 1, 2, 0.0, False, 0.0, 1.0, 0.0, 0, False, *[state.options.get(key) for key in keys]]
    apply.fn(*current, False, False)
    assert (state.options.get("return_grid"), state.options.get("grid_save")) == (False, False)
    with open(state.options.settings_file) as saved:
        assert json.load(saved)["return_grid"] is False  # remembered across restarts
    apply.fn(*current, True, True)
    assert (state.options.get("return_grid"), state.options.get("grid_save")) == (True, True)


def test_apply_settings_does_not_save_the_models_size_defaults_as_the_users(tmp_path):
    """Report webui2 #4 B: Apply (to untick "Save images") wrote the adopted 64x64 into the settings file, so a
    128-native model later started at 64x64."""
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    from .ui_blocks import handler

    (tmp_path / "models").mkdir()
    settings = tmp_path / "settings.json"
    state = ServerState(ServerConfig(models_dir=str(tmp_path / "models"), output_dir=str(tmp_path / "out"),
                                     settings_file=str(settings)))
    try:
        state.options.adopt_native_size(64)  # as at start with mixkit-tiny-sd
        apply = handler(build_ui(state), "settings_apply", "click")
        inputs = [block.elem_id for block in apply.inputs]
        values = [block.value for block in apply.inputs]
        assert values[inputs.index("settings_default_width")] == 64
        values[0] = False  # "Save generated images"
        assert apply.fn(*values) == "Settings applied."
        saved = json.loads(settings.read_text())
        assert saved["samples_save"] is False and "default_width" not in saved and "default_height" not in saved
        state.options.adopt_native_size(128)  # the next model still gets its own size
        assert (state.generation_defaults().width, state.generation_defaults().height) == (128, 128)
    finally:
        state.close()
