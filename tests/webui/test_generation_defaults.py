"""Settings' sampler defaults: omitted API fields take them, explicit fields win; saved to and read from the settings file."""

from __future__ import annotations

import json

import pytest

from pipelines.params import GenerationLimits
from webui.api_convert import to_txt2img_params
from webui.api_requests import Img2ImgRequest, Txt2ImgRequest
from webui.generation_defaults import GenerationDefaults, apply_request_defaults
from webui.options import ServerOptions

CUSTOM = GenerationDefaults(sampler="DPM++ 2M", schedule_type="Karras", steps=9, cfg_scale=4.5, width=320, height=192)


def chosen(body: dict, defaults: GenerationDefaults = CUSTOM) -> dict:
    return apply_request_defaults(Txt2ImgRequest(**body), defaults)


def test_omitted_fields_take_the_settings_defaults():
    assert chosen({"prompt": "x"}) == {"sampler": "DPM++ 2M", "schedule_type": "Karras", "steps": 9, "cfg_scale": 4.5,
                                       "width": 320, "height": 192}


def test_explicit_fields_win_even_when_equal_to_a1111s_defaults():
    # 50 steps / 512 / Euler / 7.0 are the request model's own defaults: sent explicitly, they must still win.
    body = {"steps": 50, "width": 512, "height": 512, "cfg_scale": 7.0, "sampler_name": "Euler", "scheduler": "Uniform"}
    assert chosen(body) == {"sampler": "Euler", "schedule_type": "Uniform", "steps": 50, "cfg_scale": 7.0,
                            "width": 512, "height": 512}


def test_sampler_index_and_null_fields():
    assert chosen({"sampler_index": "Heun"})["sampler"] == "Heun"
    assert chosen({"sampler_name": "LMS", "sampler_index": "Heun"})["sampler"] == "LMS"
    explicit_nulls = chosen({"sampler_name": None, "scheduler": None})
    assert (explicit_nulls["sampler"], explicit_nulls["schedule_type"]) == ("DPM++ 2M", "Karras")
    assert chosen({"steps": 3}, GenerationDefaults())["sampler"] == "DPM++ 2M"  # A1111's UI default


def test_a_named_sampler_the_default_schedule_does_not_fit_gets_its_own_default():
    # Settings say DPM++ 2M / Karras; a request naming DDIM (which has no Karras) used to be refused (422).
    assert chosen({"sampler_name": "DDIM"})["schedule_type"] == "Automatic"
    assert chosen({"sampler_name": "DPM++ 2M SDE"})["schedule_type"] == "Karras"  # fits: the default stays
    # explicit: kept in the request; the pipeline then runs DDIM without a schedule choice, as A1111 ignores it
    assert chosen({"sampler_name": "DDIM", "scheduler": "Karras"})["schedule_type"] == "Karras"
    params = to_txt2img_params(Txt2ImgRequest(sampler_name="DDIM", steps=2, width=64, height=64),
                               limits=GenerationLimits(), lora_names=None, defaults=CUSTOM)
    assert (params.sampler, params.schedule_type) == ("DDIM", "Automatic")


def test_to_params_uses_defaults_and_without_them_a1111_api_defaults():
    request = Txt2ImgRequest(prompt="x", seed=1, width=64)
    params = to_txt2img_params(request, limits=GenerationLimits(), lora_names=None, defaults=CUSTOM)
    assert (params.sampler, params.schedule_type, params.steps, params.cfg_scale, params.width, params.height) == \
        ("DPM++ 2M", "Karras", 9, 4.5, 64, 192)
    plain = to_txt2img_params(request, limits=GenerationLimits(), lora_names=None)
    assert (plain.sampler, plain.steps, plain.width, plain.height) == ("Euler", 50, 64, 512)


def test_img2img_request_takes_the_defaults_too():
    request = Img2ImgRequest(prompt="x", steps=4)
    assert apply_request_defaults(request, CUSTOM) == {"sampler": "DPM++ 2M", "schedule_type": "Karras", "steps": 4,
                                                       "cfg_scale": 4.5, "width": 320, "height": 192}


def make_options(tmp_path, limits=None, settings_file="settings.json") -> ServerOptions:
    path = str(tmp_path / settings_file) if settings_file else None
    return ServerOptions(str(tmp_path / "out"), 5, limits=limits or GenerationLimits(), settings_file=path)


def test_default_options_are_checked_against_limits_and_registries(tmp_path):
    options = make_options(tmp_path, limits=GenerationLimits(max_steps=30, max_side=1024))
    assert options.generation_defaults() == GenerationDefaults()
    for changes, fragment in (({"default_steps": 31}, "steps must be"),
                              ({"default_width": 100}, "multiple of 8"),
                              ({"default_width": 2048}, "2048"),
                              ({"default_cfg_scale": "high"}, "default_cfg_scale must be a number"),
                              ({"default_steps": True}, "default_steps must be an integer"),
                              ({"default_sampler_name": "k_euler"}, "default_sampler_name='k_euler' is not a sampler"),
                              ({"default_scheduler": "Weird"}, "default_scheduler='Weird' is not a schedule type")):
        with pytest.raises(ValueError, match=fragment):
            options.check_update(changes)
    assert options.generation_defaults() == GenerationDefaults()
    checked = options.check_update({"default_steps": 12.0, "default_sampler_name": "Euler a", "default_width": 256})
    assert checked == {"default_steps": 12, "default_sampler_name": "Euler a", "default_width": 256}
    options.apply(checked)
    assert options.generation_defaults() == GenerationDefaults(sampler="Euler a", steps=12, width=256)


def test_changes_are_saved_and_read_back_keeping_foreign_keys(tmp_path):
    (tmp_path / "settings.json").write_text(json.dumps({"some_other_tool": {"x": 1}, "default_steps": 7}))
    options = make_options(tmp_path)
    assert options.generation_defaults().steps == 7
    options.apply(options.check_update({"default_cfg_scale": 3, "control_net_unit_count": 2}))
    options.apply({"performance_preset": "low-memory"})
    saved = json.loads((tmp_path / "settings.json").read_text())
    assert saved["some_other_tool"] == {"x": 1}
    assert (saved["default_steps"], saved["default_cfg_scale"], saved["control_net_unit_count"]) == (7, 3.0, 2)
    assert saved["performance_preset"] == "low-memory" and "outdir_samples" not in saved  # paths stay operator-only
    again = make_options(tmp_path)
    assert again.generation_defaults() == GenerationDefaults(steps=7, cfg_scale=3.0)
    assert again.get("control_net_unit_count") == 2 and again.get("performance_preset") == "low-memory"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["settings.json"]  # no temporary files left


@pytest.mark.parametrize("content, fragment", [
    ("{not json", "is not valid JSON"),
    ("[1, 2]", "must hold a JSON object"),
    (json.dumps({"default_steps": -3}), "Generation defaults"),
    (json.dumps({"performance_preset": "turbo"}), "key 'performance_preset'"),
    (json.dumps({"CLIP_stop_at_last_layers": 40}), "key 'CLIP_stop_at_last_layers'"),
])
def test_a_broken_settings_file_is_refused_naming_file_and_key(tmp_path, content, fragment):
    (tmp_path / "settings.json").write_text(content)
    with pytest.raises(ValueError, match=fragment) as raised:
        make_options(tmp_path)
    assert "settings.json" in str(raised.value)


def test_a_failed_save_changes_nothing(tmp_path):
    options = make_options(tmp_path, settings_file="settings.json")
    (tmp_path / "settings.json").mkdir()  # a folder where the file should be: os.replace fails for anyone
    with pytest.raises(OSError):
        options.apply(options.check_update({"default_steps": 5}))
    assert options.generation_defaults().steps == 20
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]  # the temporary file was removed


def test_size_defaults_start_at_the_loaded_models_native_size_and_are_not_saved(tmp_path):
    options = make_options(tmp_path)
    options.adopt_native_size(64)  # mixkit-tiny-sd is trained at 64 px; 512 would tile its shapes
    assert (options.generation_defaults().width, options.generation_defaults().height) == (64, 64)
    options.apply(options.check_update({"default_steps": 9}))
    saved = json.loads((tmp_path / "settings.json").read_text())
    assert saved["default_steps"] == 9 and "default_width" not in saved and "default_height" not in saved
    options.apply(options.check_update({"default_width": 96}))  # chosen by the user: saved from now on
    assert json.loads((tmp_path / "settings.json").read_text())["default_width"] == 96


def test_a_size_from_the_settings_file_wins_over_the_models_native_size(tmp_path):
    (tmp_path / "settings.json").write_text(json.dumps({"default_width": 320}))
    options = make_options(tmp_path)
    options.adopt_native_size(64)
    assert (options.generation_defaults().width, options.generation_defaults().height) == (320, 64)
    options.adopt_native_size(65)  # not a multiple of 8: refused by the limits, the usual default instead
    assert (options.generation_defaults().width, options.generation_defaults().height) == (320, 512)


def test_size_defaults_follow_each_loaded_model_unless_the_user_chose_them(tmp_path):
    """Report webui2 #4: after a switch to a 128-native model the defaults stayed the tiny model's 64. Only the
    sizes the user chose (settings file or a change) stay put; A1111 has a fixed 512 and no native size at all."""
    options = make_options(tmp_path)
    options.adopt_native_size(64)
    options.adopt_native_size(128)  # the next model's native size
    assert (options.generation_defaults().width, options.generation_defaults().height) == (128, 128)
    options.apply(options.check_update({"default_width": 96}))
    options.adopt_native_size(1024)
    assert (options.generation_defaults().width, options.generation_defaults().height) == (96, 1024)
    assert "default_height" not in json.loads((tmp_path / "settings.json").read_text())


def test_a_native_size_the_limits_refuse_gives_the_usual_default_not_the_previous_models(tmp_path):
    options = make_options(tmp_path, limits=GenerationLimits(max_side=768))
    options.adopt_native_size(64)
    options.adopt_native_size(1024)  # an SDXL model on a server that caps sides at 768
    assert (options.generation_defaults().width, options.generation_defaults().height) == (512, 512)


def test_the_settings_form_posting_back_an_adopted_size_does_not_make_it_the_users(tmp_path):
    """The Settings form sends every field: the adopted sizes come back unchanged, which is not a choice (not saved,
    still following the model); an API POST names what it sets, and A1111 saves it."""
    options = make_options(tmp_path)
    options.adopt_native_size(64)
    options.apply(options.check_update({"samples_save": False, "default_width": 64, "default_height": 64}),
                  whole_form=True)
    saved = json.loads((tmp_path / "settings.json").read_text())
    assert saved["samples_save"] is False and "default_width" not in saved and "default_height" not in saved
    options.adopt_native_size(128)
    assert (options.generation_defaults().width, options.generation_defaults().height) == (128, 128)
    options.apply(options.check_update({"default_width": 128}))  # the API's explicit choice, though unchanged
    assert json.loads((tmp_path / "settings.json").read_text())["default_width"] == 128
    options.adopt_native_size(64)
    assert (options.generation_defaults().width, options.generation_defaults().height) == (128, 64)


def test_a_settings_page_opened_before_a_model_switch_does_not_pin_the_old_size(tmp_path):
    """QA: the page still shows the previous model's adopted 64 after a switch to a 96-px model; its Apply must not
    make 64 the user's choice."""
    options = make_options(tmp_path)
    options.adopt_native_size(64)
    options.adopt_native_size(96)  # another tab switched the model
    options.apply(options.check_update({"samples_save": False, "default_width": 64, "default_height": 64}),
                  whole_form=True)
    assert (options.generation_defaults().width, options.generation_defaults().height) == (96, 96)
    assert "default_width" not in json.loads((tmp_path / "settings.json").read_text())
    options.apply(options.check_update({"default_width": 80}), whole_form=True)  # a size no model gave: the user's
    assert json.loads((tmp_path / "settings.json").read_text())["default_width"] == 80
