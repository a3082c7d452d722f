"""A1111's Tiling outside the Python API: the request's `tiling`, the `tiling` setting (Settings, override_settings)
when the request leaves it out, a pasted infotext's "Tiling: True" (A1111's `infotext="Tiling"` on the option),
the web UI paste's note and `mixkit generate --tiling`, whose image is made again from its own PNG."""

import pytest
from PIL import Image

from pipelines.params import GenerationLimits
from webui.api_convert import to_txt2img_params
from webui.api_infotext import apply_infotext
from webui.api_requests import Txt2ImgRequest
from webui.cli import main
from webui.options import ServerOptions
from webui.ui.paste_infotext import infotext_to_form_values

BASE = "a red circle\nSteps: 4, Sampler: Euler, CFG scale: 7, Seed: 1, Size: 64x64"


def _convert(body: dict, options: dict | None = None):
    return to_txt2img_params(Txt2ImgRequest(**body), limits=GenerationLimits(), lora_names=None,
                             sampler_options=options)


def test_the_request_then_override_settings_then_settings_then_a_paste():
    request = {"prompt": "a red circle", "steps": 4}
    assert _convert(request).tiling is False  # A1111's default
    assert _convert(request, {"tiling": True}).tiling is True
    assert _convert({**request, "tiling": False}, {"tiling": True}).tiling is False  # the request's field wins
    assert _convert({**request, "tiling": True}).tiling is True
    assert _convert({**request, "override_settings": {"tiling": True}}).tiling is True
    pasted = apply_infotext(Txt2ImgRequest(infotext=BASE + ", Tiling: True"))
    assert pasted.override_settings["tiling"] is True
    assert _convert(pasted.model_dump(exclude_unset=True)).tiling is True
    assert "tiling" not in (apply_infotext(Txt2ImgRequest(infotext=BASE)).override_settings or {})


def test_a_value_that_is_no_bool_is_refused_naming_the_option(tmp_path):
    with pytest.raises(TypeError, match="tiling must be True or False"):
        _convert({"prompt": "a", "override_settings": {"tiling": "yes"}})
    with pytest.raises(ValueError, match="tiling"):
        ServerOptions(str(tmp_path), 0).check_update({"tiling": "True"})


def test_the_web_ui_paste_names_the_setting():
    _, notes = infotext_to_form_values(BASE + ", Tiling: True", GenerationLimits(), ["Euler"], ["Automatic"])
    assert any("Tiling: True" in note for note in notes), notes


def test_the_cli_flag_is_recorded_and_reproduced_from_the_png(tiny_sd1_dir, tmp_path, capsys):
    def generate(*args) -> str:
        assert main(["generate", *args, "--model", str(tiny_sd1_dir)]) == 0, capsys.readouterr().err
        return capsys.readouterr().out.split()[0]

    size = ["--width", "64", "--height", "64", "--steps", "3", "--seed", "5", "--sampler", "Euler"]
    plain = generate("a red circle", "-o", str(tmp_path / "plain"), *size)
    tiled = generate("a red circle", "-o", str(tmp_path / "tiled"), *size, "--tiling")
    text = Image.open(tiled).text["parameters"]
    assert "Tiling: True" in text and "Tiling" not in Image.open(plain).text["parameters"]
    assert Image.open(plain).tobytes() != Image.open(tiled).tobytes()
    again = generate("--infotext", tiled, "-o", str(tmp_path / "again"))
    assert Image.open(again).text["parameters"] == text
    assert Image.open(again).tobytes() == Image.open(tiled).tobytes()

