"""`mixkit generate` with A1111's Sampler parameters: the flags reach the sampler and the infotext, and an image made
with them is made again bit for bit from its own PNG (`--infotext`)."""

import pytest
from PIL import Image

from webui.cli import main

SIZE = ["--width", "64", "--height", "64", "--steps", "4", "--seed", "5"]


def _generate(capsys, *args) -> tuple[str, str]:
    assert main(["generate", *args]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    return captured.out.split()[0], captured.err


@pytest.mark.parametrize("flags, written", [
    (["--sampler", "Euler", "--s-churn", "1.5", "--s-tmax", "10"], ["Sigma churn: 1.5", "Sigma tmax: 10"]),
    (["--sampler", "DPM++ 2M", "--schedule-type", "Karras", "--sigma-min", "0.1", "--rho", "5"],
     ["Schedule min sigma: 0.1", "Schedule rho: 5"]),
    (["--sampler", "Euler", "--always-discard-next-to-last-sigma"], ["Discard penultimate sigma: True"]),
    (["--sampler", "Euler", "--sgm-noise-multiplier"], ["SGM noise multiplier: True"]),
    (["--sampler", "Euler", "--schedule-type", "Beta", "--beta-dist-alpha", "0.3"],
     ["Beta schedule alpha: 0.3", "Beta schedule beta: 0.6"]),
    (["--sampler", "UniPC", "--uni-pc-variant", "bh2", "--uni-pc-order", "2", "--no-uni-pc-lower-order-final",
      "--uni-pc-skip-type", "logSNR"],
     ["UniPC variant: bh2", "UniPC skip type: logSNR", "UniPC order: 2", "UniPC lower order final: False"]),
    (["--sampler", "Euler", "--sd-noise-schedule", "Zero Terminal SNR"], ["Noise Schedule: Zero Terminal SNR"]),
    (["--sampler", "Euler", "--use-downcasted-alpha-bar"], ["Downcast alphas_cumprod: True"]),
    (["--sampler", "Euler", "--negative", "blurry, " * 39 + "blurry", "--pad-cond-uncond"], ["Pad conds: True"]),
])
def test_flags_are_recorded_and_reproduced_from_the_png(tiny_sd1_dir, tmp_path, capsys, flags, written):
    given = flags[:2] + (flags[2:4] if flags[2] in ("--schedule-type", "--negative") else [])
    plain, _ = _generate(capsys, "a red circle", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "p"), *SIZE,
                         *given)
    original, _ = _generate(capsys, "a red circle", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "a"), *SIZE,
                            *flags)
    text = Image.open(original).text["parameters"]
    assert all(item in text for item in written), text
    assert Image.open(plain).tobytes() != Image.open(original).tobytes()
    again, err = _generate(capsys, "--infotext", original, "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "b"))
    assert "warning" not in err
    assert Image.open(again).text["parameters"] == text
    assert Image.open(again).tobytes() == Image.open(original).tobytes()


def test_a_bad_value_is_refused_before_the_load(tmp_path, capsys, monkeypatch):
    from pipelines.txt2img import TextToImage

    monkeypatch.setattr(TextToImage, "from_pretrained", lambda *a, **k: pytest.fail("loaded the model"))
    assert main(["generate", "x", "-o", str(tmp_path / "o"), "--s-churn", "-1"]) != 0
    assert "--s-churn must be a number in [0, 100]" in capsys.readouterr().err
