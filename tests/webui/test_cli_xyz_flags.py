"""`mixkit generate --xyz-x "LABEL:VALUES" ...`: A1111's X/Y/Z plot from the command line (webui/cli/xyz_flags.py)."""

import pytest
from PIL import Image

from pipelines.infotext import parse_infotext
from webui.cli import main

ARGS = ["--width", "64", "--height", "64", "--steps", "1", "--seed", "8", "--sampler", "Euler"]


def test_the_plot_writes_its_grid_then_every_image(tiny_sd1_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["generate", "a red cat", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS,
                 "--xyz-x", "Steps:1,2", "--xyz-y", "Prompt S/R:red,blue"])
    assert code == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == 5 and printed[0].endswith("xyz_grid-0000.png")
    grid = Image.open(printed[0])
    assert grid.width > 128 and grid.height > 128  # 2x2 cells of 64 px and their labels
    read = parse_infotext(grid.text["parameters"])
    assert (read["X Type"], read["X Values"], read["Y Type"], read["Y Values"]) == ("Steps", "1,2", "Prompt S/R",
                                                                                    "red,blue")
    cells = [parse_infotext(Image.open(path).text["parameters"]) for path in printed[1:]]
    assert [(cell["Steps"], cell["Prompt"]) for cell in cells] == [("1", "a red cat"), ("2", "a red cat"),
                                                                   ("1", "a blue cat"), ("2", "a blue cat")]


def test_no_legend_is_the_bare_grid_and_margins_go_with_the_legend(tiny_sd1_dir, tmp_path, capsys):
    sizes = []
    for extra in (["--xyz-no-legend", "--xyz-margin", "6"], [], ["--xyz-margin", "6"]):
        assert main(["generate", "a", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / str(len(sizes))), *ARGS,
                     "--xyz-x", "Seed:1,2", *extra]) == 0
        sizes.append(Image.open(capsys.readouterr().out.split()[0]).size)
    assert sizes[0] == (128, 64)  # as A1111's: margins are drawn with the legend
    assert sizes[2] == (sizes[1][0] + 6, sizes[1][1])


@pytest.mark.parametrize("extra, message", [
    (["--xyz-x", "Steps"], "--xyz-x must be LABEL:VALUES"),
    (["--xyz-x", "Steps:ten"], "x_values: Steps takes whole numbers: 'ten'"),
    (["--xyz-x", "Prompt S/R:dog,cat"], "Prompt S/R did not find 'dog'"),
    (["--xyz-x", "Checkpoint name:a"], "needs a way to load checkpoints"),
    (["--xyz-x", "VAE:Automatic,None"], "The VAE axis needs a way to swap the loaded model's VAE"),
    (["--xyz-x", "Token merging ratio:0,0.8"], "Token merging ratio 0.8: ToMe ratio must be a number in [0, 0.75]"),
    (["--xyz-x", "FP8 mode:Enable"], "the 'FP8 mode' axis is not supported by mixkit: mixkit has no FP8 weight"),
    (["--xyz-x", "Steps:1", "--xyz-vary-seeds", "q"], "--xyz-vary-seeds takes the letters x, y and z"),
    (["--xyz-x", "Steps:1", "-o", "plot.png"], "give -o a folder"),
    (["--xyz-x", "Steps:1", "--xyz-y", "Size:64x64,64x100000"], "X/Y/Z plot cell Steps 1, Size 64x100000: "),
])
def test_bad_plots_fail_in_one_line_before_writing(tiny_sd1_dir, tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    code = main(["generate", "a cat", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("mixkit: error:") and message in err[-1]
    assert not out.exists() and not (tmp_path / "plot.png").exists()
