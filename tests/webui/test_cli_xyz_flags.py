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


@pytest.fixture()
def vae_dir(tmp_path):
    """A --vae-dir holding "other-vae": the tiny VAE of another seed (other pixels from the same latents)."""
    from mixkit.testing.tiny_models import tiny_vae

    tiny_vae(seed=7).save_pretrained(tmp_path / "vaes" / "other-vae")
    return tmp_path / "vaes"


def test_the_vae_axis_decodes_each_cell_with_its_vae_from_vae_dir(tiny_sd1_dir, tmp_path, vae_dir, capsys):
    code = main(["generate", "a red cat", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "out"), *ARGS,
                 "--xyz-x", "VAE:Automatic,other-vae,none", "--vae-dir", str(vae_dir)])
    assert code == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == 4
    read = parse_infotext(Image.open(printed[0]).text["parameters"])
    assert (read["X Type"], read["X Values"]) == ("VAE", "Automatic,other-vae,none")
    (automatic, automatic_text), (other, other_text), (none, none_text) = [
        (image.tobytes(), parse_infotext(image.text["parameters"])) for image in map(Image.open, printed[1:])]
    assert "VAE" not in automatic_text and other_text["VAE"] == "other-vae" and "VAE" not in none_text
    assert automatic != other  # another decoder, other pixels from the same latents
    assert none == automatic  # a folder model's built-in VAE is its Automatic one


def test_the_vae_axis_on_img2img_puts_the_loaded_vae_back_for_every_input(tiny_sd1_dir, tmp_path, vae_dir, capsys):
    """A batch runs the plot per input: each starts from the VAE the command loaded, not the last cell's."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    for name in ("a.png", "b.png"):
        Image.new("RGB", (64, 64), (200, 40, 40)).save(inputs / name)
    code = main(["img2img", "--input-dir", str(inputs), "a red cat", "--model", str(tiny_sd1_dir), "--output-dir",
                 str(tmp_path / "out"), *ARGS, "--denoising-strength", "0.5", "--xyz-x", "VAE:other-vae,Automatic",
                 "--vae-dir", str(vae_dir)])
    assert code == 0, capsys.readouterr().err
    written = [Image.open(path) for path in capsys.readouterr().out.split() if "xyz_grid" not in path]
    texts = [parse_infotext(image.text["parameters"]).get("VAE") for image in written]
    assert texts == ["other-vae", None, "other-vae", None]  # per input: other-vae, then the loaded (Automatic) one


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
    (["--xyz-x", "VAE:Automatic,other-vae"], "X axis: Unknown VAE 'other-vae' on the VAE axis. Valid names: "
                                             "'Automatic', 'None' (the VAE files and folders listed are --vae-dir's)."),
    (["--xyz-x", "VAE:Automatic", "--vae-dir", "no-such-folder"], "--vae-dir no-such-folder does not exist"),
    (["--vae-dir", "."], "--vae-dir lists the VAEs of an X/Y/Z plot's VAE axis"),
    (["--xyz-x", "Token merging ratio:0,0.25,0.5", "--int8"],
     "X axis: Token merging ratio 0.25, 0.5: ToMe changes the UNet's attention, but --int8 compiles the UNet into a "
     "fixed int8 graph; plot only 0, or leave that out."),
    (["--xyz-y", "Token merging ratio:0.5", "--backend", "torch.compile"],
     "Y axis: Token merging ratio 0.5: ToMe changes the UNet's attention, but --backend torch.compile replaces the "
     "UNet with a compiled graph"),
    (["--xyz-x", "Token merging ratio:0,0.8"], "Token merging ratio 0.8: ToMe ratio must be a number in [0, 0.75]"),
    (["--xyz-x", "FP8 mode:Disable,On"], "X axis: FP8 mode 'On' is not one of 'Disable', 'Enable for SDXL', "
                                         "'Enable'."),
    (["--xyz-x", "FP8 mode:Disable,Enable", "--int8"], "X axis: FP8 mode Enable: FP8 storage changes the UNet's "
                                                       "layers, but --int8 compiles the UNet into a fixed int8 graph"),
    (["--xyz-x", "Hires sampler:Euler"], "X axis 'Hires sampler' needs hires fix (enable_hr), which this call does "
                                         "not use."),
    (["--xyz-x", "Hires sampler:Euler,Eular", "--hires"], "X axis: Hires sampler 'Eular': The hires pass's sampler"),
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
