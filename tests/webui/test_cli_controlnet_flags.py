"""`--controlnet MODEL[:IMAGE]` and the `--cn-*` options: how the command line is read into units."""

import pytest

from webui.cli import build_parser
from webui.cli.controlnet_flags import in_option_terms, split_model_and_image


def units(*argv):
    return build_parser().parse_args(["generate", "x", *argv]).controlnet


def test_each_controlnet_starts_a_unit_and_the_options_after_it_set_its_fields():
    assert units("--controlnet", "canny:edges.png", "--cn-module", "canny", "--cn-weight", "0.5", "--cn-pixel-perfect",
                 "--controlnet", "depth", "--cn-image", "d.png", "--cn-start", "0.2", "--cn-end", "0.8",
                 "--cn-control-mode", "ControlNet is more important", "--cn-processor-res", "256") == [
        {"flag": "--controlnet canny:edges.png",
         "fields": {"model": "canny", "image": "edges.png", "module": "canny", "weight": 0.5, "pixel_perfect": True}},
        {"flag": "--controlnet depth",
         "fields": {"model": "depth", "image": "d.png", "guidance_start": 0.2, "guidance_end": 0.8,
                    "control_mode": "ControlNet is more important", "processor_res": 256}},
    ]
    assert units() == []


@pytest.mark.parametrize("argv, fragment", [
    (["--cn-weight", "0.5", "--controlnet", "canny"], "put it after the --controlnet MODEL[:IMAGE] it belongs to"),
    (["--controlnet", "canny", "--cn-weight", "0.5", "--cn-weight", "1"], "given twice for --controlnet canny"),
    (["--controlnet", "canny:a.png", "--cn-image", "b.png"], "MODEL:IMAGE counts as --cn-image"),
    (["--controlnet", ":a.png"], "names no model"),
    (["--controlnet", "canny", "--cn-weight", "strong"], "invalid float value: 'strong'"),
])
def test_misplaced_or_repeated_options_are_usage_errors(capsys, argv, fragment):
    with pytest.raises(SystemExit) as exit_info:
        units(*argv)
    assert exit_info.value.code == 2
    assert fragment in capsys.readouterr().err


def test_the_image_follows_the_last_colon_unless_the_whole_value_is_a_path(tmp_path):
    named = tmp_path / "odd:name.safetensors"
    named.write_bytes(b"")
    assert split_model_and_image("canny [fp16]:C/edges.png") == ("canny [fp16]", "C/edges.png")
    assert split_model_and_image(str(named)) == (str(named), None)
    assert split_model_and_image(f"{tmp_path}/cn.safetensors:e.png") == (f"{tmp_path}/cn.safetensors", "e.png")
    assert split_model_and_image("C:\\cn\\canny.safetensors") == ("C:\\cn\\canny.safetensors", None)
    assert split_model_and_image("canny") == ("canny", None)


def test_unit_keys_in_messages_become_the_options_that_set_them():
    assert in_option_terms("ControlNet 0 (--controlnet c) guidance_start must be a number in [0.0, 1.0], got 2.") == \
        "ControlNet 0 (--controlnet c) --cn-start must be a number in [0.0, 1.0], got 2."
    assert in_option_terms("ControlNet 0 weight must be a finite number >= 0") == \
        "ControlNet 0 --cn-weight must be a finite number >= 0"
    assert in_option_terms("ControlNet 0 has no image; give the unit an image") == \
        "ControlNet 0 has no image; give the unit an image"
