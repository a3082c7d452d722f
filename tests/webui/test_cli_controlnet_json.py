"""`--controlnet-json FILE`: units as sd-webui-controlnet's API takes them (its keys, old spellings and image forms),
pictures as paths relative to the file or base64; the same unit gives the same image as the `--cn-*` flags."""

import base64
import json

import pytest
from PIL import Image, ImageDraw

from pipelines.txt2img import TextToImage
from webui.cli import main

RUN = ["--steps", "2", "--seed", "5", "--sampler", "Euler", "--cfg", "5", "--width", "64", "--height", "64"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from mixkit.testing.tiny_controlnet import build_tiny_controlnet

    root = tmp_path_factory.mktemp("cli-controlnet-json")
    build_tiny_controlnet(root / "controlnets" / "tiny_canny", seed=1)
    (root / "units").mkdir()
    edges = Image.new("RGB", (64, 64), "black")
    ImageDraw.Draw(edges).ellipse((12, 12, 52, 52), outline="white", width=3)
    edges.save(root / "units" / "edges.png")
    return root


def _generate(capsys, *argv) -> Image.Image:
    code = main(["generate", "a ring", *RUN, *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return Image.open(captured.out.split()[0])


def test_a_saved_request_unit_gives_the_image_of_the_same_flags(tiny_sd1_dir, files, tmp_path, capsys):
    data = base64.b64encode((files / "units" / "edges.png").read_bytes()).decode()
    request = {"alwayson_scripts": {"controlnet": {"args": [
        {"enabled": False, "model": "tiny_canny", "image": "edges.png"},  # skipped, as the API skips it
        {"model": "tiny_canny [0123abcd]", "module": "canny", "input_image": "edges.png", "weight": 0.8,
         "guidance": 0.6, "control_mode": 1, "resize_mode": 0, "threshold_a": 80},  # old keys, codes
    ]}}}
    (files / "units" / "request.json").write_text(json.dumps(request))
    common = ["--model", str(tiny_sd1_dir), "--controlnet-dir", str(files / "controlnets")]
    from_json = _generate(capsys, *common, "--controlnet-json", str(files / "units" / "request.json"),
                          "-o", str(tmp_path / "json.png"))
    from_flags = _generate(capsys, *common, "--controlnet", f"tiny_canny:{files / 'units' / 'edges.png'}",
                           "--cn-module", "canny", "--cn-weight", "0.8", "--cn-end", "0.6", "--cn-control-mode",
                           "My prompt is more important", "--cn-resize-mode", "Just Resize", "--cn-threshold-a", "80",
                           "-o", str(tmp_path / "flags.png"))
    assert from_json.tobytes() == from_flags.tobytes()
    assert from_json.text["parameters"] == from_flags.text["parameters"]
    (tmp_path / "b64.json").write_text(json.dumps([{"model": "tiny_canny", "module": "canny", "image": data,
                                                    "weight": 0.8, "guidance_end": 0.6, "threshold_a": 80,
                                                    "control_mode": "My prompt is more important",
                                                    "resize_mode": "Just Resize"}]))
    from_base64 = _generate(capsys, *common, "--controlnet-json", str(tmp_path / "b64.json"),
                            "-o", str(tmp_path / "b64.png"))
    assert from_base64.tobytes() == from_flags.tobytes()


@pytest.mark.parametrize("content, fragment", [
    ('[{"model": "tiny_canny", "image": "e.png", "weigth": 2}]', "--controlnet-json unit 0: unknown key 'weigth'"),
    ("{not json", "not a JSON file"),
    ('{"units": []}', "expected a list of units"),
    ('[{"model": "tiny_canny", "image": "missing.png"}]', "missing.png' does not exist"),
    ('[{"model": "tiny_canny", "image": "e.png", "hr_option": "Low res only"}]',
     "hr_option 'Low res only': the units of `mixkit generate` guide both hires-fix passes"),
    ('[{"model": "tiny_canny", "image": "e.png", "guidance_start": 0.7, "guidance_end": 0.3}]',
     "ControlNet 0 (--controlnet-json unit 0): --cn-start 0.7 is after --cn-end 0.3"),
])
def test_bad_files_are_refused_before_the_load(files, tmp_path, capsys, monkeypatch, content, fragment):
    monkeypatch.setattr(TextToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))
    Image.new("RGB", (64, 64)).save(tmp_path / "e.png")
    (tmp_path / "units.json").write_text(content)
    assert main(["generate", "x", *RUN, "--controlnet-dir", str(files / "controlnets"), "--controlnet-json",
                 str(tmp_path / "units.json"), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("mixkit: error:") and fragment in err[-1], err
    assert not (tmp_path / "o").exists()
