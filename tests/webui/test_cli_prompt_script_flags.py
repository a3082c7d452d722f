"""`mixkit generate --prompt-matrix` and `--prompts-from-file`: A1111's two prompt scripts from the command line
(webui/cli/prompt_script_flags.py)."""

import pytest
from PIL import Image

from pipelines.infotext import parse_infotext
from webui.cli import main

ARGS = ["--width", "64", "--height", "64", "--steps", "1", "--seed", "8", "--sampler", "Euler"]


def test_the_matrix_writes_its_grid_then_every_combination(tiny_sd1_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["generate", "a cat|red|blue", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS,
                 "--prompt-matrix", "--matrix-different-seeds", "--matrix-at-start", "--matrix-margin", "4"])
    assert code == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == 5 and printed[0].endswith("prompt_matrix-0000.png")
    grid = Image.open(printed[0])
    assert grid.width == 48 + 2 * 64 + 4 and grid.height > 2 * 64 + 4  # 2x2 cells, labels on top and left
    read = [parse_infotext(Image.open(path).text["parameters"]) for path in printed[1:]]
    assert [(r["Prompt"], r["Seed"]) for r in read] == [("a cat", "8"), ("red, a cat", "9"), ("blue, a cat", "10"),
                                                        ("red, blue, a cat", "11")]


def test_a_prompt_list_writes_every_lines_images(tiny_sd1_dir, tmp_path, capsys):
    listing = tmp_path / "list.txt"
    listing.write_text("a red cat\n\n--prompt a dog --steps 2 --n_iter 2\n", encoding="utf-8")
    code = main(["generate", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "out"), *ARGS,
                 "--prompts-from-file", str(listing), "--prompts-iterate-seed"])
    assert code == 0
    printed = capsys.readouterr().out.split()
    read = [parse_infotext(Image.open(path).text["parameters"]) for path in printed]
    assert [(r["Prompt"], r["Steps"], r["Seed"]) for r in read] == [("a red cat", "1", "8"), ("a dog", "2", "9"),
                                                                    ("a dog", "2", "10")]


def test_combined_writes_a_grid_of_the_list_first(tiny_sd1_dir, tmp_path, capsys):
    listing = tmp_path / "list.txt"
    listing.write_text("a\nb", encoding="utf-8")
    assert main(["generate", "photo", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "out"), *ARGS,
                 "--prompts-from-file", str(listing), "--prompts-combined", "--prompts-position", "end"]) == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == 3 and printed[0].endswith("grid-0000.png") and Image.open(printed[0]).size == (128, 64)
    assert parse_infotext(Image.open(printed[2]).text["parameters"])["Prompt"] == "photo b"


@pytest.mark.parametrize("prompt, extra, message", [
    ("a|b", ["--prompt-matrix", "--matrix-margin", "501"], "--matrix-margin: must be a whole number of pixels"),
    ("a" + "|b" * 10, ["--prompt-matrix"], "the most is 9 parts"),
    ("a|b", ["--prompt-matrix", "--xyz-x", "Steps:1"], "--xyz-x/y/z and --prompt-matrix are two scripts"),
    ("a|b", ["--prompt-matrix", "-o", "m.png"], "Prompt matrix writes several images: give -o a folder"),
    ("a", ["--prompts-from-file", "missing.txt"], "--prompts-from-file missing.txt: cannot read it"),
    ("a", ["--prompts-from-file", "bad.txt"], "--prompts-from-file bad.txt, line 2: unknown option --stepz"),
    ("a", ["--prompts-from-file", "big.txt"], "--prompts-from-file big.txt, line 1: steps must be in [1, 1000]"),
    # every line within the limits, 11,200 images in all: over the script-image cap (10,000 by default)
    ("a", ["--prompts-from-file", "huge.txt"], "Prompts from file would generate 11,200 images (7 lines x each "
                                               "line's batch size x batch count), more than the 10,000"),
    ("a|b|c", ["--prompt-matrix", "--max-script-images", "3"], "Prompt matrix would generate 4 images (one per "
                                                               "combination of the '|' parts: 4), more than the 3"),
    ("a|b", ["--xyz-x", "Steps:1,2,3", "--max-script-images", "2"], "The X/Y/Z plot would generate 3 images"),
    ("a", ["--prompts-from-file", "huge.txt", "--max-script-images", "-1"], "--max-script-images must be a whole "
                                                                          "number of images of at least 1, got -1."),
    # read up to the bound, not to the end: /dev/zero filled memory
    ("a", ["--prompts-from-file", "/dev/zero"], "--prompts-from-file /dev/zero: more than 16 MB of text"),
])
def test_bad_scripts_fail_in_one_line_before_loading(tiny_sd1_dir, tmp_path, capsys, monkeypatch, prompt, extra,
                                                      message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.txt").write_text("a cat\n--stepz 2\n", encoding="utf-8")
    (tmp_path / "big.txt").write_text("--steps 5000\n", encoding="utf-8")
    (tmp_path / "huge.txt").write_text("--n_iter 100 --batch_size 16\n" * 7, encoding="utf-8")
    out = tmp_path / "out"
    code = main(["generate", prompt, "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("mixkit: error:") and message in err[-1], err
    assert not out.exists() and not (tmp_path / "m.png").exists()


def test_a_list_at_the_cap_runs(tiny_sd1_dir, tmp_path, capsys):
    listing = tmp_path / "list.txt"
    listing.write_text("a red cat\n--prompt a dog --n_iter 2\n", encoding="utf-8")
    code = main(["generate", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "out"), *ARGS,
                 "--prompts-from-file", str(listing), "--max-script-images", "3"])
    assert code == 0 and len(capsys.readouterr().out.split()) == 3


def test_a_list_choosing_a_checkpoint_is_refused_before_any_image(tiny_sd1_dir, tmp_path, capsys):
    """The CLI loads one model: a line's --sd_model is refused with what to do instead, nothing written."""
    listing = tmp_path / "list.txt"
    listing.write_text("a red cat\n--prompt a dog --sd_model other\n", encoding="utf-8")
    out = tmp_path / "out"
    code = main(["generate", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, "--prompts-from-file", str(listing)])
    assert code != 0
    error = capsys.readouterr().err
    assert "line 2: --sd_model needs a way to load checkpoints" in error and "HTTP API" in error
    assert not out.exists() or not list(out.iterdir())
