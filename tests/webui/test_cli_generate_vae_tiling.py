"""`mixkit generate --vae-tiling`: VAE tiling from the CLI, labelled approximate in the PNG and on stderr.

A1111 has no per-image VAE tiling in txt2img (its tiled decode is the Tiled VAE / MultiDiffusion
extension); mixkit labels it as the approximation it is above the VAE's native size (see
mixkit.runtime.memory): `VAE tiling: <tile px>` in the infotext and the CLI's APPROXIMATE line.
"""

import numpy as np
from PIL import Image

from pipelines.infotext import parse_optimization
from webui.cli import main

ARGS = ["--width", "128", "--height", "128", "--steps", "2", "--seed", "5"]  # twice the tiny model's 64 px


def _run(tiny_sd1_dir, folder, capsys, *extra):
    assert main(["generate", "a cube", "--model", str(tiny_sd1_dir), "-o", str(folder), *ARGS, *extra]) == 0
    captured = capsys.readouterr()
    return captured.out.split()[0], captured.err


def test_vae_tiling_reaches_the_decode_and_is_labelled_approximate(tiny_sd1_dir, tmp_path, capsys):
    whole, whole_err = _run(tiny_sd1_dir, tmp_path / "whole", capsys)
    tiled, tiled_err = _run(tiny_sd1_dir, tmp_path / "tiled", capsys, "--vae-tiling")
    assert "APPROXIMATE" not in whole_err
    warning = [line for line in tiled_err.splitlines() if line.startswith("Output is APPROXIMATE")]
    assert warning == ["Output is APPROXIMATE (not comparable to exact generations): VAE tiling (images above 64 px "
                       "decoded in blended 64-px tiles)"]
    labels = parse_optimization(Image.open(tiled).text["parameters"])
    assert labels.vae_tiling == 64 and labels.exact == ()  # the exact preset otherwise: nothing else changed
    # above the native size the tiles' group norms differ from a whole decode: the flag reached the VAE
    assert not np.array_equal(np.asarray(Image.open(whole)), np.asarray(Image.open(tiled)))


def test_vae_tiling_and_an_approximation_share_one_warning_line(tiny_sd1_dir, tmp_path, capsys):
    png, err = _run(tiny_sd1_dir, tmp_path, capsys, "--vae-tiling", "--tome", "0.5", "--preset", "low-memory")
    warning = [line for line in err.splitlines() if line.startswith("Output is APPROXIMATE")]
    assert len(warning) == 1 and "ToMe" in warning[0] and warning[0].endswith("VAE tiling (images above 64 px "
                                                                              "decoded in blended 64-px tiles)")
    labels = parse_optimization(Image.open(png).text["parameters"])
    assert (labels.vae_tiling, labels.tome, labels.exact[0]) == (64, 0.5, "low-memory")


def test_vae_tiling_on_openvino_is_refused_before_loading(tiny_sd1_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["generate", "a", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, "--vae-tiling",
                 "--backend", "openvino"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("mixkit: error: --vae-tiling: backend 'openvino'")
    assert "cannot honour ['vae_tiling']" in err[-1]
    assert not any(line.startswith("Loaded ") for line in err)
    assert not out.exists() or not any(out.glob("*.png"))
