"""A1111's Settings > Compatibility "Use old prompt editing timelines" (`use_old_scheduling`) outside the Python API:
Settings and override_settings of the HTTP API, a pasted infotext's "Old prompt editing timelines: True" (A1111's
`infotext="Old prompt editing timelines"` on the option: its paste sets the override), the web UI paste's note and
`mixkit generate --use-old-scheduling`, whose image is made again from its own PNG."""

import pytest
from PIL import Image

from pipelines.params import GenerationLimits
from webui.api_convert import to_txt2img_params
from webui.api_infotext import apply_infotext
from webui.api_requests import Txt2ImgRequest
from webui.cli import main
from webui.options import ServerOptions
from webui.ui.paste_infotext import infotext_to_form_values

BASE = "a [red:blue:1.0] circle\nSteps: 4, Sampler: Euler, CFG scale: 7, Seed: 1, Size: 64x64"


def _convert(body: dict, options: dict | None = None):
    return to_txt2img_params(Txt2ImgRequest(**body), limits=GenerationLimits(), lora_names=None,
                             sampler_options=options)


def test_settings_then_override_settings_then_a_paste():
    request = {"prompt": "a [red:blue:1.0] circle", "steps": 4}
    assert _convert(request).use_old_scheduling is False  # A1111's default: the new timelines
    assert _convert(request, {"use_old_scheduling": True}).use_old_scheduling is True
    overridden = {**request, "override_settings": {"use_old_scheduling": False}}
    assert _convert(overridden, {"use_old_scheduling": True}).use_old_scheduling is False
    pasted = apply_infotext(Txt2ImgRequest(infotext=BASE + ", Old prompt editing timelines: True"))
    assert pasted.override_settings["use_old_scheduling"] is True
    assert _convert(pasted.model_dump(exclude_unset=True)).use_old_scheduling is True
    assert "use_old_scheduling" not in (apply_infotext(Txt2ImgRequest(infotext=BASE)).override_settings or {})


def test_a_value_that_is_no_bool_is_refused_naming_the_option(tmp_path):
    with pytest.raises(TypeError, match="use_old_scheduling must be True or False"):
        _convert({"prompt": "a", "override_settings": {"use_old_scheduling": "yes"}})
    with pytest.raises(ValueError, match="use_old_scheduling"):
        ServerOptions(str(tmp_path), 0).check_update({"use_old_scheduling": "True"})


def test_the_web_ui_paste_names_the_setting():
    _, notes = infotext_to_form_values(BASE + ", Old prompt editing timelines: True", GenerationLimits(), ["Euler"],
                                       ["Automatic"])
    assert any("Old prompt editing timelines: True" in note for note in notes), notes
    _, plain = infotext_to_form_values(BASE, GenerationLimits(), ["Euler"], ["Automatic"])
    assert not any("Old prompt editing timelines" in note for note in plain)


def test_the_cli_flag_is_recorded_and_reproduced_from_the_png(tiny_sd1_dir, tmp_path, capsys):
    def generate(*args) -> str:
        assert main(["generate", *args, "--model", str(tiny_sd1_dir)]) == 0, capsys.readouterr().err
        return capsys.readouterr().out.split()[0]

    size = ["--width", "64", "--height", "64", "--steps", "4", "--seed", "5", "--sampler", "Euler"]
    new = generate("a [red:blue:1.0] circle", "-o", str(tmp_path / "new"), *size)
    old = generate("a [red:blue:1.0] circle", "-o", str(tmp_path / "old"), *size, "--use-old-scheduling")
    text = Image.open(old).text["parameters"]
    assert "Old prompt editing timelines: True" in text
    assert "Old prompt editing timelines" not in Image.open(new).text["parameters"]
    assert Image.open(new).tobytes() != Image.open(old).tobytes()  # "1.0": step 1 (old) vs never (new)
    again = generate("--infotext", old, "-o", str(tmp_path / "again"))
    assert Image.open(again).text["parameters"] == text
    assert Image.open(again).tobytes() == Image.open(old).tobytes()
