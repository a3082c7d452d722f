"""`mixkit outpaint IMAGE "prompt"`: A1111's Poor man's outpainting through `pipelines.outpaint`, its PNG with the
inpaint pass's infotext; every bad flag refused before the model loads, nothing written."""

import numpy as np
import pytest
from PIL import Image

from pipelines.img2img import ImageToImage
from pipelines.infotext import parse_infotext
from pipelines.outpaint import outpaint
from webui.cli import main

ARGS = ["--steps", "3", "--seed", "9", "--sampler", "Euler"]


@pytest.fixture(scope="module")
def picture(tmp_path_factory):
    path = tmp_path_factory.mktemp("outpaint-cli") / "picture.png"
    Image.fromarray(np.random.default_rng(4).integers(0, 256, (40, 48, 3), dtype=np.uint8)).save(path)  # 48x40
    return path


def test_the_border_is_the_python_apis_and_the_picture_stays(tiny_sd1_dir, picture, tmp_path, capsys):
    code = main(["outpaint", str(picture), "a field", "--model", str(tiny_sd1_dir), "--pixels", "20", "--direction",
                 "right", "--direction", "down", "--mask-blur", "2", "--denoising-strength", "0.9",
                 "-o", str(tmp_path / "wide.png"), *ARGS])
    assert code == 0, capsys.readouterr().err
    assert capsys.readouterr().out.split() == [str(tmp_path / "wide.png")]
    saved = Image.open(tmp_path / "wide.png")
    assert saved.size == (72, 64)  # 48 + 20 and 40 + 20, each rounded up to the next multiple of 8
    expected = outpaint(ImageToImage.from_pretrained(tiny_sd1_dir), Image.open(picture), right=24, bottom=24,
                        mask_blur=2, denoising_strength=0.9, prompt="a field", steps=3, seed=9, sampler="Euler")
    assert saved.convert("RGB").tobytes() == expected.images[0].tobytes()
    assert saved.text["parameters"] == expected.infotexts[0]
    fields = parse_infotext(saved.text["parameters"])
    assert (fields["Mask blur"], fields["Masked content"], fields["Denoising strength"]) == ("4", "fill", "0.9")
    # the picture's pixels away from the seam are kept exactly: the mask reaches 2 x 2 pixels in and is blurred with
    # sigma 2 x 2 (kernel 21), so the blend stops 4 + 10 pixels before the old edge
    kept = np.asarray(saved.convert("RGB"))[:40 - 14, :48 - 14]
    assert kept.tobytes() == np.asarray(Image.open(picture).convert("RGB"))[:40 - 14, :48 - 14].tobytes()
    changed = np.asarray(saved.convert("RGB"))[:40, :48] != np.asarray(Image.open(picture).convert("RGB"))
    assert changed[:, 48 - 14:].any() and changed[40 - 14:, :].any()  # ... and the blend does eat into it


@pytest.mark.parametrize("extra, message", [
    (["--pixels", "0"], "--pixels must be an integer number of pixels in [1, 2048], got 0"),
    (["--direction", "sideways"], "--direction must be a non-empty list among left, right, up, down"),
    (["--mask-blur", "65"], "--mask-blur must be an integer in [0, 64] for outpainting"),
    (["--width", "64"], "--width: outpaint's size is IMAGE's plus the border"),
    (["--masked-content", "noise"], "Unknown masked content 'noise'"),
    (["--denoising-strength", "2"], "--denoising-strength must be a number in [0, 1]"),
    (["--pixels", "2048"], "IMAGE is 48x40; with the border it is 4144x4136, larger than one generation may be"),
])
def test_bad_flags_are_refused_before_the_load(picture, tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.setattr(ImageToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))
    assert main(["outpaint", str(picture), "x", "-o", str(tmp_path / "out"), *ARGS, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mixkit: error:") and message in err[0], err
    assert not (tmp_path / "out").exists()


def test_an_axis_not_extended_must_fit_the_size_step(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ImageToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))
    Image.new("RGB", (48, 37)).save(tmp_path / "odd.png")
    assert main(["outpaint", str(tmp_path / "odd.png"), "--direction", "left,right", "-o", str(tmp_path / "o")]) == 2
    assert "height 37 is not a multiple of 8 and outpainting does not extend it; add 'up' or 'down'" in \
        capsys.readouterr().err
