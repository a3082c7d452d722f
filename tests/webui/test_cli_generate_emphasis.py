"""`mixkit generate --emphasis / --comma-padding-backtrack`, and "Emphasis" read back from a pasted infotext
(A1111 writes `Emphasis: No norm` when not "Original"; its paste sets the `emphasis` option from it)."""

import pytest
from PIL import Image

from webui.cli import main

SIZE = ["--width", "64", "--height", "64", "--steps", "2", "--sampler", "Euler", "--seed", "5"]


def _generate(capsys, *args):
    assert main(["generate", *args]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    return captured.out.split()[0], captured.err


def test_an_emphasis_image_is_reproduced_from_its_infotext(tiny_sd1_dir, tmp_path, capsys):
    original, _ = _generate(capsys, "a (red:1.5) circle", "--model", str(tiny_sd1_dir), "--emphasis", "No norm",
                            "-o", str(tmp_path / "a"), *SIZE)
    text = Image.open(original).text["parameters"]
    assert "Emphasis: No norm" in text
    again, err = _generate(capsys, "--infotext", original, "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "b"))
    assert "not honoured" not in err
    assert Image.open(again).text["parameters"] == text
    assert Image.open(again).tobytes() == Image.open(original).tobytes()
    plain, _ = _generate(capsys, "a (red:1.5) circle", "--model", str(tiny_sd1_dir), "--emphasis", "Ignore",
                         "-o", str(tmp_path / "c"), *SIZE)
    assert Image.open(plain).tobytes() != Image.open(original).tobytes()


def test_a_pasted_emphasis_key_is_honoured(tiny_sd1_dir, tmp_path, capsys):
    text = ("a (red:1.5) circle\nSteps: 2, Sampler: Euler, CFG scale: 5, Seed: 1, Size: 64x64, RNG: CPU, "
            "Emphasis: No norm")
    path, err = _generate(capsys, "--infotext", text, "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "o"))
    assert "Emphasis" not in err
    assert "Emphasis: No norm" in Image.open(path).text["parameters"]


@pytest.mark.parametrize("flags, message", [
    (["--emphasis", "Loud"], "Unknown emphasis mode 'Loud'"),
    (["--comma-padding-backtrack", "75"], "--comma-padding-backtrack must be an int in 0..74"),
])
def test_bad_values_are_refused_before_the_load(tmp_path, capsys, monkeypatch, flags, message):
    from pipelines.txt2img import TextToImage

    monkeypatch.setattr(TextToImage, "from_pretrained", lambda *a, **k: pytest.fail("loaded the model"))
    assert main(["generate", "a", "-o", str(tmp_path / "o"), *flags]) == 2
    assert message in capsys.readouterr().err
