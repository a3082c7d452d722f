"""`mixkit img2img IMAGE "prompt" --sd-upscale FACTOR ...`: A1111's SD upscale from the command line
(webui/cli/sd_upscale_flags.py)."""

import numpy as np
import pytest
from PIL import Image

from pipelines.infotext import parse_infotext
from webui.cli import main

ARGS = ["--width", "64", "--height", "64", "--steps", "1", "--seed", "8", "--sampler", "Euler",
        "--denoising-strength", "0.4"]


@pytest.fixture
def image(tmp_path):
    path = tmp_path / "small.png"
    Image.fromarray(np.random.default_rng(2).integers(0, 256, (48, 48, 3), dtype=np.uint8)).save(path)
    return str(path)


def test_writes_one_upscale_per_batch_count(tiny_sd1_dir, image, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["img2img", image, "a red cat", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS,
                 "--batch-count", "2", "--sd-upscale", "2", "--sd-upscale-overlap", "32"])
    assert code == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == 2
    pictures = [Image.open(path) for path in printed]
    assert [picture.size for picture in pictures] == [(96, 96), (96, 96)]
    read = [parse_infotext(picture.text["parameters"]) for picture in pictures]
    assert [(r["Seed"], r["Size-1"], r["SD upscale overlap"], r["SD upscale upscaler"]) for r in read] == [
        ("8", "64", "32", "Lanczos"), ("9", "64", "32", "Lanczos")]


@pytest.mark.parametrize("extra, message", [
    (["--sd-upscale", "0.5"], "--sd-upscale must be a number in [1.0, 8.0], got 0.5"),
    (["--sd-upscale", "2", "--sd-upscale-overlap", "64"], "Tile overlap 64 must be at least 0 and less than"),
    (["--sd-upscale", "2", "--sd-upscale-upscaler", "Nope"], "--sd-upscale-upscaler must be an index into or a name"),
    (["--sd-upscale", "1", "--width", "128", "--height", "128"], "smaller than one tile (128x128)"),
])
def test_bad_flags_fail_in_one_line_before_writing(tiny_sd1_dir, image, tmp_path, capsys, extra, message):
    out = tmp_path / "out"
    code = main(["img2img", image, "a cat", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("mixkit: error:") and message in err[-1], err
    assert not out.exists()
