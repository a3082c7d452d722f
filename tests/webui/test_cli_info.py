"""`mixkit info IMAGE`: prints the stored infotext, or its parsed form with --json; one-line errors."""

from __future__ import annotations

import json

import pytest
from PIL import Image

import webui.cli
from pipelines.png import save_png

INFOTEXT = (
    "桜の木の下の少女, 着物\nNegative prompt: lowres\n"
    "Steps: 28, Sampler: DPM++ 2M Karras, CFG scale: 7.5, Seed: 42, Size: 512x768, Model hash: 7f96a1a9ca, "
    'Lora hashes: "add_detail: 7c6bad76eb54"'
)


@pytest.fixture
def cli(monkeypatch):
    # Build only the `info` parser: the other sub-commands are other modules' business (and their
    # imports would slow this test down); `main` and its error handling are the real ones.
    monkeypatch.setattr(webui.cli, "SUBCOMMANDS", ["info"])
    return webui.cli.main


@pytest.fixture
def png_with_infotext(tmp_path):
    return save_png(Image.new("RGB", (8, 8)), tmp_path / "00000-42.png", INFOTEXT)


def test_info_prints_the_infotext(cli, png_with_infotext, capsys):
    assert cli(["info", str(png_with_infotext)]) == 0
    captured = capsys.readouterr()
    assert captured.out == INFOTEXT + "\n"
    assert captured.err == ""


def test_info_json_prints_the_parsed_dict(cli, png_with_infotext, capsys):
    assert cli(["info", str(png_with_infotext), "--json"]) == 0
    parsed = json.loads(capsys.readouterr().out)
    assert parsed["Prompt"] == "桜の木の下の少女, 着物"
    assert parsed["Negative prompt"] == "lowres"
    assert (parsed["Size-1"], parsed["Size-2"]) == ("512", "768")
    assert parsed["Lora hashes"] == "add_detail: 7c6bad76eb54"
    assert parsed["Clip skip"] == "1"  # A1111's default for a missing key
    assert parsed["Schedule type"] == "Karras"  # implied by the old-style sampler name


def test_info_json_without_defaults(cli, png_with_infotext, capsys):
    assert cli(["info", str(png_with_infotext), "--json", "--no-defaults"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "Prompt": "桜の木の下の少女, 着物", "Negative prompt": "lowres", "Steps": "28", "Sampler": "DPM++ 2M Karras",
        "CFG scale": "7.5", "Seed": "42", "Size-1": "512", "Size-2": "768", "Model hash": "7f96a1a9ca",
        "Lora hashes": "add_detail: 7c6bad76eb54",
    }


def test_info_on_an_image_without_infotext_exits_1(cli, tmp_path, capsys):
    path = save_png(Image.new("RGB", (8, 8)), tmp_path / "plain.png", None)
    assert cli(["info", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "plain.png has no infotext" in captured.err


@pytest.mark.parametrize(("make", "fragment"), [
    (lambda folder: folder / "missing.png", "missing.png' does not exist"),
    (lambda folder: folder, "is a folder"),
    (lambda folder: (folder / "notes.png").write_text("hello") and folder / "notes.png", "notes.png' is not an image"),
])
def test_info_user_errors_are_one_line_with_exit_2(cli, tmp_path, capsys, make, fragment):
    path = make(tmp_path)
    assert cli(["info", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("mixkit: error: ") and captured.err.count("\n") == 1
    assert fragment in captured.err
