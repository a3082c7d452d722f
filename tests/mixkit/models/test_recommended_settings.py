"""A model folder's `mixkit_generation.json`: read strictly, used only for settings the caller leaves out."""

from __future__ import annotations

import shutil

import pytest

from mixkit.models.diffusion.recommended import RECOMMENDED_FILE, RecommendedSettings, read_recommended


def test_a_folder_without_the_file_recommends_nothing(tmp_path):
    assert read_recommended(tmp_path) == RecommendedSettings()
    assert RecommendedSettings().generation_values() == {}


def test_the_file_round_trips_and_the_note_is_not_a_generation_setting(tmp_path):
    settings = RecommendedSettings(sampler="Euler a", steps=30, cfg_scale=5.0, note="measured")
    (tmp_path / RECOMMENDED_FILE).write_text(settings.to_json())
    assert read_recommended(tmp_path) == settings
    assert settings.generation_values() == {"sampler": "Euler a", "steps": 30, "cfg_scale": 5.0}


def test_calibration_prompts_round_trip_and_are_not_generation_settings(tmp_path):
    settings = RecommendedSettings(cfg_scale=5.0, calibration_prompts=["a red circle", "a blue star"])
    assert settings.calibration_prompts == ("a red circle", "a blue star")  # a JSON list becomes a tuple
    (tmp_path / RECOMMENDED_FILE).write_text(settings.to_json())
    assert read_recommended(tmp_path) == settings
    assert settings.generation_values() == {"cfg_scale": 5.0}


@pytest.mark.parametrize("text, message", [
    ('{"cfg": 5}', r"unknown setting\(s\) \['cfg'\]; valid ones: \['sampler', 'steps', 'cfg_scale', 'clip_skip', 'note', "
                   r"'calibration_prompts'\]"),
    ('{"clip_skip": 0}', "clip_skip must be an integer >= 1, got 0"),
    ('{"clip_skip": 2.0}', "clip_skip must be an integer >= 1"),
    ('{"calibration_prompts": "a cube"}', "calibration_prompts must be a list of non-empty strings"),
    ('{"calibration_prompts": ["a cube", ""]}', "calibration_prompts must be a list of non-empty strings"),
    ('{"steps": 0}', "steps must be an integer >= 1, got 0"),
    ('{"steps": 2.5}', "steps must be an integer"),
    ('{"cfg_scale": -1}', "cfg_scale must be a finite number >= 0"),
    ('{"cfg_scale": 1' + "0" * 400 + '}', "cfg_scale must be a finite number >= 0"),  # was an OverflowError
    ('{"cfg_scale": true}', "cfg_scale must be a finite number"),
    ('{"sampler": ""}', "sampler must be a WebUI sampler name"),
    ('[5]', "must hold a JSON object"),
    ('{cfg_scale: 5}', "is not valid JSON"),
])
def test_a_bad_file_names_the_file_and_what_is_wrong(tmp_path, text, message):
    (tmp_path / RECOMMENDED_FILE).write_text(text)
    with pytest.raises(ValueError, match=message) as error:
        read_recommended(tmp_path)
    assert RECOMMENDED_FILE in str(error.value)


@pytest.fixture(scope="module")
def recommending_model(tiny_sd1_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("recommending") / "sd"
    shutil.copytree(tiny_sd1_dir, folder)
    (folder / RECOMMENDED_FILE).write_text(RecommendedSettings(cfg_scale=3.5, steps=3, sampler="Euler",
                                                                     clip_skip=2).to_json())
    return folder


def test_the_pipeline_uses_them_for_what_the_caller_leaves_out(recommending_model):
    from pipelines.params import Txt2ImgParams
    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pretrained(recommending_model)
    assert pipe.model.recommended.cfg_scale == 3.5
    left_out = pipe(prompt="a red circle", width=64, height=64, seed=1).infotexts[0]
    assert "Steps: 3, Sampler: Euler, " in left_out and "CFG scale: 3.5," in left_out and "Clip skip: 2" in left_out
    chosen = pipe(prompt="a red circle", width=64, height=64, seed=1, cfg_scale=7.0, steps=2).infotexts[0]
    assert "Steps: 2, Sampler: Euler, " in chosen and "CFG scale: 7," in chosen
    # A params object is complete: its A1111 defaults are what runs.
    whole = pipe(Txt2ImgParams(prompt="a red circle", width=64, height=64, steps=2, seed=1)).infotexts[0]
    assert "Sampler: DPM++ 2M, " in whole and "CFG scale: 7," in whole


def test_generate_on_the_command_line_says_it_uses_them_and_flags_override(recommending_model, tmp_path, capsys):
    from PIL import Image

    from webui.cli import main

    base = ["generate", "a red circle", "--model", str(recommending_model), "--width", "64", "--height", "64",
            "--seed", "3"]
    assert main([*base, "-o", str(tmp_path / "a")]) == 0
    assert ("recommended sampler=Euler, steps=3, cfg_scale=3.5, clip_skip=2 (its mixkit_generation.json)"
            in capsys.readouterr().err)
    infotext = Image.open(next((tmp_path / "a").iterdir())).text["parameters"]
    assert "Steps: 3, Sampler: Euler, " in infotext and "CFG scale: 3.5," in infotext and "Clip skip: 2" in infotext
    assert main([*base, "--cfg", "6", "--steps", "2", "--sampler", "DPM++ 2M", "--clip-skip", "1",
                 "-o", str(tmp_path / "b")]) == 0
    assert "recommended" not in capsys.readouterr().err
    infotext = Image.open(next((tmp_path / "b").iterdir())).text["parameters"]
    assert "Steps: 2, Sampler: DPM++ 2M, " in infotext and "CFG scale: 6," in infotext and "Clip skip" not in infotext


def test_the_shipped_tiny_model_recommends_the_cfg_it_was_measured_best_at():
    from mixkit.tiny.recipe_sd import TINY_SD_RECOMMENDED
    from mixkit.tiny.shipped import DEFAULT_TEXT_TO_IMAGE, shipped_model_path

    assert read_recommended(shipped_model_path(DEFAULT_TEXT_TO_IMAGE)) == TINY_SD_RECOMMENDED
    assert TINY_SD_RECOMMENDED.generation_values() == {"cfg_scale": 5.0}
