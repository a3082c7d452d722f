"""`--grid-font PATH` on `mixkit generate` / `img2img` (webui/cli/grid_font_flag.py): the X/Y/Z plot's and Prompt
matrix's legend font, checked before the model loads."""

import os

import pytest
from PIL import Image

from webui.cli import main

from .cli_inputs import write_noise_picture

DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
DEJAVU_MATH = "/usr/share/fonts/truetype/dejavu/DejaVuMathTeXGyre.ttf"  # has λ too, drawn otherwise
ARGS = ["--width", "64", "--height", "64", "--steps", "1", "--seed", "8", "--sampler", "Euler"]


@pytest.mark.parametrize("script", [["--xyz-x", "Prompt S/R:red,λ"], ["--prompt-matrix"]])
def test_a_bad_grid_font_fails_in_one_line_before_the_model_loads(tiny_sd1_dir, tmp_path, capsys, script):
    out = tmp_path / "out"
    missing = tmp_path / "Roboto.ttf"
    code = main(["generate", "a red cat|blue", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, *script,
                 "--grid-font", str(missing)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("mixkit: error:") and f"--grid-font '{missing}' is not a file" in err[-1]
    assert not out.exists()


@pytest.mark.parametrize("script", [["--xyz-x", "Denoising:0.5,0.75"], ["--prompt-matrix"]])
def test_img2img_refuses_a_bad_grid_font_before_the_model_loads(tmp_path, capsys, script):
    init = tmp_path / "init.png"
    write_noise_picture(init, seed=0, width=64, height=64)
    out, missing = tmp_path / "out", tmp_path / "Roboto.ttf"
    code = main(["img2img", str(init), "a red cat|blue", "--model", str(tmp_path / "no-model"), "-o", str(out), *ARGS,
                 *script, "--grid-font", str(missing)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and f"--grid-font '{missing}' is not a file" in err[-1] and not out.exists()


@pytest.mark.skipif(not os.path.isfile(DEJAVU), reason="DejaVu fonts are not installed here")
def test_the_plots_legend_is_drawn_in_the_grid_font(tiny_sd1_dir, tmp_path, capsys):
    grids = []
    for name, font in (("sans", DEJAVU), ("math", DEJAVU_MATH)):
        assert main(["generate", "a red cat", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / name), *ARGS,
                     "--xyz-x", "Prompt S/R:red,λ", "--grid-font", font]) == 0
        grids.append(Image.open(capsys.readouterr().out.split()[0]).convert("RGB"))
    sans, math = grids
    assert sans.size == math.size and sans.height > 64
    pad = sans.height - 64
    assert sans.crop((0, pad, sans.width, sans.height)).tobytes() == \
        math.crop((0, pad, math.width, math.height)).tobytes()  # the same cells
    assert sans.crop((0, 0, sans.width, pad)).tobytes() != math.crop((0, 0, math.width, pad)).tobytes()
