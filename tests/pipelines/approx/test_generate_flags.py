"""`mixkit generate --taesd/--deepcache/--tome`: labelled images and an "approximate" line on stderr."""

import numpy as np
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
    (["--int8", "--batch-size", "2"], "--int8 on --backend torch compiles its graph for one image at a time"),
    (["--int8-vae-decoder", "off"], "--int8-vae-decoder off needs --int8"),
    (["--int8", "--int8-vae-decoder", "on"], "--int8-vae-decoder on needs --backend openvino"),
    (["--int8", "--deepcache", "2"], "use --backend openvino for --int8 with --deepcache"),
    (["--tome", "0.5", "--backend", "openvino"], "use --backend torch for --tome"),
    (["--deepcache", "2", "--backend", "torch.compile"], "use --backend torch or openvino for --deepcache"),
])
def test_bad_values_are_one_line_errors_and_write_nothing(tiny_sd1_dir, tmp_path, capsys, extra, message):
    out = tmp_path / "out"
    code = main(["generate", "a", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("mixkit: error:") and message in err[-1]
    assert not out.exists() or not any(out.glob("*.png"))


def test_int8_with_torch_compile_is_refused_before_loading(tiny_sd1_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["generate", "a", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, "--int8",
                 "--backend", "torch.compile"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "--int8 compiles its own int8 graph; use --backend openvino" in err[-1]
    assert not any(line.startswith("Loaded ") for line in err)
    assert not out.exists() or not any(out.glob("*.png"))


def test_int8_on_openvino_labels_the_png_and_reuses_its_calibration(tiny_sd1_dir, tmp_path, capsys, monkeypatch):
    pytest.importorskip("openvino", reason="openvino not installed: pip install 'mixkit[openvino]'")
    pytest.importorskip("nncf", reason="nncf not installed: pip install 'mixkit[openvino]'")
    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "cache"))
    run = ["generate", "a cube", "--model", str(tiny_sd1_dir), *ARGS, "--steps", "2", "--backend", "openvino", "--int8"]
    assert main([*run, "-o", str(tmp_path / "a")]) == 0
    first = capsys.readouterr()
    warning = [line for line in first.err.splitlines() if line.startswith("Output is APPROXIMATE")]
    assert len(warning) == 1 and "int8 UNet" in warning[0] and "calibrated on 8 prompt(s) x 2 steps at 64x64" in warning[0]
    assert parse_optimization(Image.open(first.out.split()[0]).text["parameters"]).int8
    assert main([*run, "-o", str(tmp_path / "b")]) == 0  # a second process-like run: the cached graph
    second = capsys.readouterr()
    assert "int8 UNet" in second.err and "(OpenVINO, NNCF post-training quantization; cached at 64x64" in second.err
    assert np.array_equal(np.asarray(Image.open(first.out.split()[0])), np.asarray(Image.open(second.out.split()[0])))
    assert parse_optimization(Image.open(first.out.split()[0]).text["parameters"]).int8_vae
    assert main([*run, "--int8-vae-decoder", "off", "-o", str(tmp_path / "c")]) == 0  # the decoder stays in float
    third = capsys.readouterr()
    labels = parse_optimization(Image.open(third.out.split()[0]).text["parameters"])
    assert labels.int8 and not labels.int8_vae and "int8 UNet (OpenVINO" in third.err


def test_deepcache_on_openvino_labels_the_png(tiny_sd1_dir, tmp_path, capsys, monkeypatch):
    pytest.importorskip("openvino", reason="openvino not installed: pip install 'mixkit[openvino]'")
    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["generate", "a cube", "--model", str(tiny_sd1_dir), *ARGS, "--backend", "openvino", "--deepcache", "2",
                 "-o", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert "DeepCache: full UNet every 2 steps" in captured.err
    assert parse_optimization(Image.open(captured.out.split()[0]).text["parameters"]).deepcache == 2
    assert list((tmp_path / "cache" / "openvino").glob("unet-shallow-*.xml"))  # the branch's graph, cached
