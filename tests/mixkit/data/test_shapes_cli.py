"""`mixkit world make` / `mixkit world parse` (webui/cli/world.py), driven through argparse as the CLI does.

Lives next to the shapes tests until `world` is listed in webui.cli.SUBCOMMANDS; then it belongs in
tests/webui/test_cli_world.py.
"""

from __future__ import annotations

import argparse
import json

import pytest

from mixkit.data.shapes import read_manifest
from webui.cli import world


def _run(argv):
    parser = argparse.ArgumentParser(prog="mixkit")
    world.add_parser(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


def test_make_writes_kohya_folder_with_held_out_split(tmp_path, capsys):
    assert _run(["world", "make", str(tmp_path / "ds"), "--count", "6", "--size", "32", "--repeats", "3",
                 "--held-out", "0.1", "--split", "held_out", "--captions", "rich"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "ds")
    records = read_manifest(tmp_path / "ds")
    assert len(records) == 6 and all(r["image"].startswith("3_shapes/") for r in records)
    info = json.loads((tmp_path / "ds" / "world.json").read_text())
    held = {tuple(c) for c in info["config"]["held_out"]}
    assert all((r["scene"].objects[0].shape, r["scene"].objects[0].colour, r["scene"].background) in held
               for r in records)
    assert all("," in r["caption"] for r in records)


def test_make_with_a_new_concept_vocabulary(tmp_path):
    _run(["world", "make", str(tmp_path / "ds"), "--count", "5", "--shapes", "heart", "--colours", "orange",
          "--two-shape-fraction", "0", "--concept", "heart"])
    records = read_manifest(tmp_path / "ds")
    assert {(o.shape, o.colour) for r in records for o in r["scene"].objects} == {("heart", "orange")}


def test_parse_prints_attributes(capsys):
    _run(["world", "parse", "a small red circle on the left of a blue square, on a white background"])
    assert json.loads(capsys.readouterr().out) == {
        "objects": [{"shape": "circle", "colour": "red", "size": "small", "position": None},
                    {"shape": "square", "colour": "blue", "size": None, "position": None}],
        "background": "white", "relation": "left of"}


def test_user_errors_are_value_errors_naming_the_value(tmp_path):
    with pytest.raises(ValueError, match="unknown entries \\['blob'\\]"):
        _run(["world", "make", str(tmp_path / "ds"), "--count", "2", "--shapes", "blob"])
    with pytest.raises(ValueError, match="image size must be an integer in \\[8, 4096\\], got 2"):
        _run(["world", "make", str(tmp_path / "ds"), "--count", "2", "--size", "2"])
    assert not (tmp_path / "ds").exists()


def test_held_out_split_without_held_out_names_the_cli_flag(tmp_path):
    # The library's refusal advises with_held_out(config, fraction), a Python call a CLI user cannot make.
    with pytest.raises(ValueError, match=r"--split held_out .* none are held out: add --held-out FRACTION "
                                         r"\(like --held-out 0.1\)"):
        _run(["world", "make", str(tmp_path / "w3"), "--count", "3", "--split", "held_out"])
    assert not (tmp_path / "w3").exists()
