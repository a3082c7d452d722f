"""`mixkit generate --taesd/--deepcache/--tome`: labelled images and an "approximate" line on stderr."""

import pytest
from PIL import Image

from pipelines.infotext import parse_optimization
from webui.cli import main

ARGS = ["--width", "64", "--height", "64", "--steps", "4", "--seed", "3"]


def test_approximate_flags_label_the_png_and_warn(tiny_sd1_dir, tiny_taesd_dir, tmp_path, capsys):
    code = main(["generate", "a cube", "--model", str(tiny_sd1_dir), "-o", str(tmp_path), *ARGS,
                 "--taesd", str(tiny_taesd_dir), "--deepcache", "2", "--tome", "0.5"])
    captured = capsys.readouterr()
    assert code == 0
    warning = [line for line in captured.err.splitlines() if line.startswith("Output is APPROXIMATE")]
    assert len(warning) == 1 and "TAESD decode" in warning[0] and "DeepCache" in warning[0] and "ToMe" in warning[0]
    infotext = Image.open(captured.out.split()[0]).text["parameters"]
    labels = parse_optimization(infotext)
    assert (labels.taesd, labels.deepcache, labels.tome) == (True, 2, 0.5)


def test_exact_run_prints_no_approximate_line(tiny_sd1_dir, tmp_path, capsys):
    assert main(["generate", "a cube", "--model", str(tiny_sd1_dir), "-o", str(tmp_path), *ARGS,
                 "--deepcache", "1", "--tome", "0"]) == 0
    captured = capsys.readouterr()
    assert "APPROXIMATE" not in captured.err
    assert not parse_optimization(Image.open(captured.out.split()[0]).text["parameters"]).approximate


@pytest.mark.parametrize("extra, message", [
    (["--tome", "0.9"], "--tome: ToMe ratio must be a number in [0, 0.75]"),
    (["--deepcache", "0"], "--deepcache: DeepCache interval must be an integer in [1, 50]"),
    (["--taesd", "/nonexistent/taesd"], "TAESD folder '/nonexistent/taesd' does not exist"),
])
def test_bad_values_are_one_line_errors_and_write_nothing(tiny_sd1_dir, tmp_path, capsys, extra, message):
    out = tmp_path / "out"
    code = main(["generate", "a", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("mixkit: error:") and message in err[-1]
    assert not out.exists() or not any(out.glob("*.png"))
