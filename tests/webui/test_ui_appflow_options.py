"""The AppFlow tab's options form: widgets from each app's option specs (bounded by the server's caps), values that
reach the app, refusals before anything is queued, values kept per app, and a reloaded page that shows the run."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pytest

from webui.ui.appflow_options import AUTO_CHOICE, options_from_values, remember_option, reused_seed
from webui.ui.reattach import ENDED

from .test_ui_reattach_tabs import restore_handler

VIDEO, AUDIO, SD = "text_to_video_generation", "music_generation", "text2image_generation"


@pytest.fixture(scope="module")
def built(tiny_text_to_video_dir, tiny_audioldm_dir, tmp_path_factory):
    """A model-less server whose video and music apps run the tiny models, and its built Blocks."""
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-appflow-options")
    (root / "models").mkdir()
    state = ServerState(ServerConfig(models_dir=str(root / "models"), output_dir=str(root / "out"),
                                     appflow_models={VIDEO: {"video_generator": str(tiny_text_to_video_dir)},
                                                     AUDIO: {"audio_generator": str(tiny_audioldm_dir)}}))
    try:
        yield state, build_ui(state)
    finally:
        state.close()


def page(session: str):
    return SimpleNamespace(session_hash=session, request=SimpleNamespace(scope={}))


def render_form(blocks, app: str, saved: dict | None = None):
    """The tab's form for `app` as a page gets it (the tab's @gr.render function, run in a Blocks of its own): its
    components by elem_id, and the events it wires."""
    (renderable,) = [r for r in blocks.default_config.renderables if r.fn.__name__ == "app_form"]
    with gr.Blocks() as demo:
        renderable.fn(app, saved or {})
    components = {block.elem_id: block for block in demo.blocks.values() if getattr(block, "elem_id", None)}
    return components, list(demo.fns.values())


def bounds(component) -> tuple:
    return type(component).__name__, component.minimum, component.maximum, component.value


def auto_box(component) -> tuple:
    """An "auto" option's text box: empty for the model's choice, its range in its label."""
    assert isinstance(component, gr.Textbox) and component.placeholder == "empty: the model's choice"
    return component.value, component.label.rsplit(" ", 2)[-2:]


def test_the_sd_apps_form_offers_its_generation_options_within_the_servers_limits(built):
    from pipelines.params import CLIP_SKIP_MAX, SEED_MAX

    state, blocks = built
    form, _ = render_form(blocks, SD)
    limits = state.limits
    assert auto_box(form["appflow_option_steps"]) == ("", ["[1,", f"{limits.max_steps}]"])  # empty: the model's
    assert auto_box(form["appflow_option_cfg_scale"]) == ("", ["[0,", f"{limits.max_cfg_scale:g}]"])
    assert auto_box(form["appflow_option_width"]) == ("", ["[8,", f"{limits.max_side}]"])
    assert bounds(form["appflow_option_batch_size"]) == ("Slider", 1, limits.max_batch_size, 1)
    assert bounds(form["appflow_option_clip_skip"]) == ("Slider", 1, CLIP_SKIP_MAX, 1)
    assert bounds(form["appflow_option_seed"]) == ("Number", -1, SEED_MAX, -1)
    assert bounds(form["appflow_option_subseed_strength"]) == ("Slider", 0, 1, 0.0)
    sampler = form["appflow_option_sampler"]
    assert sampler.value == AUTO_CHOICE and ("DPM++ 2M", "DPM++ 2M") in sampler.choices
    assert form["appflow_option_schedule_type"].value == "Automatic"
    assert {"appflow_random_seed", "appflow_reuse_seed", "appflow_random_subseed"} <= set(form)
    assert "appflow_option_loras" not in form  # LoRAs are named in the prompt's <lora:...> tags
    # set interactive: left to Gradio, the rendered form's sliders came up disabled in Chromium
    assert all(c.interactive is True for key, c in form.items() if key.startswith("appflow_option_"))


def test_the_video_apps_form_caps_frames_at_four_times_the_batch_limit(built):
    from mixkit.io.video import MAX_FPS

    state, blocks = built
    form, _ = render_form(blocks, VIDEO)
    assert bounds(form["appflow_option_num_frames"]) == ("Slider", 1, state.limits.max_batch_size * 4, 16)
    assert bounds(form["appflow_option_steps"]) == ("Slider", 1, state.limits.max_steps, 25)
    assert bounds(form["appflow_option_fps"]) == ("Slider", 1, MAX_FPS, 8)  # (0, 240]: a slider starts a step up
    assert auto_box(form["appflow_option_width"]) == ("", ["[8,", "2048]"])
    assert "appflow_option_generator" not in form


def test_the_audio_apps_form_caps_the_clip_at_the_servers_30_seconds(built):
    from webui.appflow_audio import HTTP_MAX_AUDIO_SECONDS

    _, blocks = built
    form, _ = render_form(blocks, AUDIO)
    assert auto_box(form["appflow_option_audio_length_in_s"]) == ("", ["(0,", f"{HTTP_MAX_AUDIO_SECONDS:g}]"])
    # empty: the loaded model's own (10 steps / CFG 2.5 for AudioLDM, 200 / 2 MusicLDM, 200 / 3.5 AudioLDM 2)
    assert auto_box(form["appflow_option_steps"]) == ("", ["[1,", "1000]"])
    assert auto_box(form["appflow_option_cfg_scale"]) == ("", ["[0,", "100]"])
    assert bounds(form["appflow_option_batch_size"]) == ("Slider", 1, 16, 1)
    assert form["appflow_option_transcription"].value == ""
    assert "appflow_option_num_frames" not in form


def test_run_takes_the_inputs_then_the_options_then_the_task_id(built):
    _, blocks = built
    form, fns = render_form(blocks, AUDIO)
    (run,) = [fn for fn in fns if (form["appflow_run"]._id, "click") in [tuple(t) for t in fn.targets]]
    assert [component.elem_id for component in run.inputs] == [
        "appflow_input_prompt", "appflow_option_negative_prompt", "appflow_option_audio_length_in_s",
        "appflow_option_steps", "appflow_option_cfg_scale", "appflow_option_seed", "appflow_option_batch_size",
        "appflow_option_transcription", "appflow_task_id"]


def test_a_run_with_changed_options_reaches_the_app_and_a_reloaded_page_shows_it(built, tmp_path):
    from webui.ui.appflow_tab import run_app

    state, blocks = built
    description = state.describe_app(VIDEO)
    names = list(description["option_specs"])
    values = {**description["options"], "num_frames": 2, "steps": 2, "width": "32", "height": " 24 ", "seed": 5,
              "sampler": AUTO_CHOICE}  # as the page sends them: an "auto" option's box holds text
    run = run_app(state, VIDEO, description["inputs"], ["prompt"], ["a cat surfing"], "task(appflow-opts-0001)",
                  page("tab"), tmp_path / "cache", names, [values[name] for name in names])
    *_, (progress, gallery, _, clips, outputs, task_box) = run
    assert f"Done: {VIDEO}, 2 image(s) and 1 video(s)" in progress and task_box == ENDED + "task(appflow-opts-0001)"
    assert outputs["video"]["frame_count"] == 2 and outputs["seed"] == 5 and len(gallery) == 3
    (only,) = list(restore_handler(blocks, "appflow")(page("new-tab"), "task(appflow-opts-0001)"))
    assert only[1:] == (gallery, None, clips, outputs, task_box)


@pytest.mark.parametrize("option, value, fragment", [
    ("num_frames", 65, "num_frames must be an integer in [1, 64] on this server"),  # the server's cap, as HTTP
    ("fps", 0, "fps must be a number in (0, 240]"),  # the app's own check
    ("width", "12", "width must be a multiple of 8"),
    ("width", "wide", "option width must be an integer or empty (the model's choice), got 'wide'"),
])
def test_a_bad_option_is_refused_before_anything_is_queued(built, tmp_path, option, value, fragment):
    from webui.ui.appflow_tab import run_app

    state, _ = built
    description = state.describe_app(VIDEO)
    task_id = f"task(appflow-bad-{option})"
    with pytest.raises(gr.Error) as refused:
        next(run_app(state, VIDEO, description["inputs"], ["prompt"], ["a cat"], task_id, page("tab"),
                     tmp_path / "cache", [option], [value]))
    assert fragment in refused.value.message and state.tasks.find(task_id, None) is None


def test_an_options_value_is_kept_per_app_when_switching_apps(built):
    _, blocks = built
    form, fns = render_form(blocks, VIDEO)
    frames = form["appflow_option_num_frames"]
    (remember,) = [fn for fn in fns if (frames._id, "change") in [tuple(t) for t in fn.targets]]
    saved = remember.fn({AUDIO: {"steps": 4}}, 3)
    assert saved == {AUDIO: {"steps": 4}, VIDEO: {"num_frames": 3}}
    audio_form, _ = render_form(blocks, AUDIO, saved)  # switch to the music app: its own value, not the video's
    assert audio_form["appflow_option_steps"].value == "4"  # an "auto" option's text box (empty: the model's steps)
    back, _ = render_form(blocks, VIDEO, saved)  # and back
    assert back["appflow_option_num_frames"].value == 3 and back["appflow_option_steps"].value == 25


def test_form_values_become_options_the_app_reads():
    description = {"options": {"seed": -1, "sampler": None, "steps": None, "num_frames": 16, "cfg_scale": 9.0},
                   "option_specs": {"seed": {"kind": "seed", "auto": False},
                                    "sampler": {"kind": "choice", "auto": True},
                                    "steps": {"kind": "int", "auto": True},
                                    "num_frames": {"kind": "int", "auto": False},
                                    "cfg_scale": {"kind": "float", "auto": False}}}
    names = ["seed", "sampler", "steps", "num_frames", "cfg_scale"]
    assert options_from_values(description, names, [None, AUTO_CHOICE, "", None, 9.0]) == {}  # all defaults
    assert options_from_values(description, names, [7.0, "Euler a", "12", 2.0, 3.5]) == {
        "seed": 7, "sampler": "Euler a", "steps": 12, "num_frames": 2, "cfg_scale": 3.5}
    assert type(options_from_values(description, names, [7.0, AUTO_CHOICE, None, 16, 9.0])["seed"]) is int
    assert options_from_values(description, ["steps"], ["12.0"]) == {"steps": 12}
    assert options_from_values(description, ["steps"], [" "]) == {}  # blank: the model's
    with pytest.raises(ValueError, match=r"no form option\(s\) \['fps'\]; its form has \['seed', 'sampler'"):
        options_from_values(description, ["fps"], [8])


def test_reuse_sets_the_last_runs_seed_and_leaves_the_box_without_one():
    assert reused_seed({"seeds": [1234, 1235]}) == 1234  # an SD app's first image
    assert reused_seed({"seed": 99, "video": {}}) == 99  # a video or music app's
    assert reused_seed({"seed": -1}) == gr.skip() and reused_seed(None) == gr.skip()


def test_remember_keeps_other_apps_values():
    assert remember_option("b", "x")({"a": {"x": 1}, "b": {"y": 2}}, 5) == {"a": {"x": 1}, "b": {"y": 2, "x": 5}}
    assert remember_option("a", "x")(None, 5) == {"a": {"x": 5}}


def test_the_captioning_apps_form_has_a_checkbox_and_the_servers_token_cap(built):
    _, blocks = built
    form, _ = render_form(blocks, "image2text_generation")
    sample = form["appflow_option_do_sample"]
    assert isinstance(sample, gr.Checkbox) and sample.value is False
    assert bounds(form["appflow_option_max_new_tokens"]) == ("Slider", 1, 256, 20)  # the server's cap, not 1024
    assert bounds(form["appflow_option_num_beams"]) == ("Slider", 1, 64, 1)
    assert auto_box(form["appflow_option_top_p"]) == ("", ["(0,", "1]"])  # empty: the checkpoint's own


def test_the_detection_apps_form_offers_its_thresholds_and_empty_prompt_policy(built):
    _, blocks = built
    form, _ = render_form(blocks, "openset_det_sam")
    assert bounds(form["appflow_option_box_threshold"]) == ("Slider", 0, 1, 0.35)
    policy = form["appflow_option_empty_prompt"]
    assert policy.value == "error" and [value for _, value in policy.choices] == ["error", "no_detections"]
