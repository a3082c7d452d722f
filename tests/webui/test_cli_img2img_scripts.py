"""`mixkit img2img` with A1111's img2img scripts (webui/cli/img2img_scripts.py): the X/Y/Z plot with img2img's axes,
Prompt matrix and Prompts from file on the init image; one script per run, refused before anything is written."""

import pytest
from PIL import Image

from pipelines.infotext import parse_infotext
from webui.cli import main

from .cli_inputs import write_noise_picture

ARGS = ["--width", "64", "--height", "64", "--steps", "2", "--seed", "8", "--sampler", "Euler",
        "--denoising-strength", "0.75"]


@pytest.fixture(scope="module")
def init(tmp_path_factory):
    path = tmp_path_factory.mktemp("img2img-scripts") / "init.png"
    write_noise_picture(path, seed=0, width=64, height=64)
    return path


def img2img(tiny_sd1_dir, init, out, *flags):
    return main(["img2img", str(init), "a red cat", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, *flags])


def infotexts(paths):
    return [parse_infotext(Image.open(path).text["parameters"]) for path in paths]


def test_the_plot_varies_img2img_axes(tiny_sd1_dir, init, tmp_path, capsys):
    assert img2img(tiny_sd1_dir, init, tmp_path, "--xyz-x", "Denoising:0.5,1", "--xyz-y", "Prompt S/R:red,blue") == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == 5 and printed[0].endswith("xyz_grid-0000.png")
    grid = infotexts(printed[:1])[0]
    assert (grid["X Type"], grid["X Values"], grid["Y Type"], grid["Y Values"]) == (
        "Denoising", "0.5,1", "Prompt S/R", "red,blue")
    assert [(cell["Denoising strength"], cell["Prompt"]) for cell in infotexts(printed[1:])] == [
        ("0.5", "a red cat"), ("1", "a red cat"), ("0.5", "a blue cat"), ("1", "a blue cat")]


def test_prompt_matrix_on_the_init_image(tiny_sd1_dir, init, tmp_path, capsys):
    code = main(["img2img", str(init), "a red cat|hat", "--model", str(tiny_sd1_dir), "-o", str(tmp_path), *ARGS,
                 "--prompt-matrix"])
    assert code == 0
    printed = capsys.readouterr().out.split()
    assert printed[0].endswith("prompt_matrix-0000.png") and len(printed) == 3
    assert [(text["Prompt"], text["Denoising strength"]) for text in infotexts(printed[1:])] == [
        ("a red cat", "0.75"), ("a red cat, hat", "0.75")]


def test_prompts_from_file_run_each_line_on_the_init_image(tiny_sd1_dir, init, tmp_path, capsys):
    listing = tmp_path / "list.txt"
    listing.write_text("a dog\n--prompt \"a bird\" --steps 1\n", encoding="utf-8")
    assert img2img(tiny_sd1_dir, init, tmp_path / "out", "--prompts-from-file", str(listing)) == 0
    texts = infotexts(capsys.readouterr().out.split())
    assert [(text["Prompt"], text["Steps"], text["Denoising strength"]) for text in texts] == [
        ("a dog a red cat", "2", "0.75"), ("a bird a red cat", "1", "0.75")]  # A1111 joins with a space


@pytest.mark.parametrize("flags, message", [
    (["--xyz-x", "Hires steps:1,2"], "Hires steps"),
    (["--xyz-x", "Denoising:0.5,2"], "X/Y/Z plot cell Denoising 2.0: denoising_strength"),
    (["--xyz-x", "Steps:1", "--loopback", "2"], "--loopback and --xyz-x/y/z are two scripts"),
    (["--prompt-matrix", "--loopback", "2"], "--loopback and --prompt-matrix are two scripts"),
    (["--sd-upscale", "2", "--loopback", "2"], "--loopback and --sd-upscale are two scripts"),
    (["--sd-upscale", "2", "--xyz-x", "Steps:1"], "--xyz-x/y/z and --sd-upscale are two scripts"),
    (["--xyz-x", "Steps:1", "--prompt-matrix"], "--xyz-x/y/z and --prompt-matrix are two scripts"),
    (["--xyz-x", "Steps:1", "-o", "plot.png"], "X/Y/Z plot writes several images: give -o a folder"),
    (["--prompt-matrix", "-o", "m.png"], "Prompt matrix writes several images: give -o a folder"),
    # the script-image cap (--max-script-images), for each script img2img runs
    (["--loopback", "3", "--batch-count", "2", "--max-script-images", "5"],
     "Loopback would generate 6 images (3 loops x batch count 2), more than the 5 one script job may make"),
    (["--xyz-x", "Steps:1,2", "--batch-size", "2", "--max-script-images", "3"],
     "The X/Y/Z plot would generate 4 images (2 cells x their batch size x batch count), more than the 3"),
    (["--sd-upscale", "2", "--sd-upscale-overlap", "8", "--max-script-images", "1"],
     "x batch count 1), more than the 1 one script job may make"),
    (["--prompts-from-file", "list.txt", "--max-script-images", "1"], "Prompts from file would generate 2 images"),
    (["--loopback", "2", "--max-script-images", "0"],
     "--max-script-images must be a whole number of images of at least 1, got 0."),
])
def test_bad_scripts_are_refused_before_the_model_loads(init, tmp_path, capsys, monkeypatch, flags, message):
    monkeypatch.chdir(tmp_path)
    listing = tmp_path / "list.txt"
    listing.write_text("a dog\na bird\n", encoding="utf-8")
    code = main(["img2img", str(init), "a red cat", "--model", str(tmp_path / "no-model"), *ARGS, *flags])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["list.txt"]


@pytest.mark.parametrize("flags, images", [
    (["--loopback", "2"], 2 + 1),  # the loops, then their grid
    (["--xyz-x", "Steps:1,2"], 2 + 1),
    (["--sd-upscale", "1", "--sd-upscale-overlap", "8"], 1),  # one 64 px tile
])
def test_a_script_at_its_cap_runs_with_the_cap_passed_on(tiny_sd1_dir, init, tmp_path, capsys, flags, images):
    # a cap of exactly the job's images lets it through the check and the run, which plans again with the flag's
    # context (one image fewer is refused before loading, above)
    cap = 1 if "--sd-upscale" in flags else 2
    assert img2img(tiny_sd1_dir, init, tmp_path / "out", *flags, "--max-script-images", str(cap)) == 0
    assert len(capsys.readouterr().out.split()) == images
