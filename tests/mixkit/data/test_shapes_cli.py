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


def _one_line_error(capsys, code) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("mixkit: error: "), err
    return err[0][len("mixkit: error: "):]


def test_make_into_an_unwritable_place_names_the_folder_not_the_hidden_staging_name(tmp_path, capsys, monkeypatch):
    import errno
    import tempfile

    from webui.cli import main

    def read_only(*args, **kwargs):  # as a read-only mount answers (root passes every permission bit)
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    target = tmp_path / "wm"
    message = _one_line_error(capsys, main(["world", "make", str(target), "--count", "2"]))
    assert message == f"Output folder {str(target)!r} is not writable (Read-only file system); choose another."
    assert list(tmp_path.iterdir()) == []


def test_train_judge_checks_its_folder_before_training(tmp_path, capsys, monkeypatch):
    import mixkit.evaluation
    from webui.cli import main

    monkeypatch.setattr(mixkit.evaluation, "train_judge", lambda *a, **k: pytest.fail("trained before the check"))
    (tmp_path / "afile").write_text("x")
    target = tmp_path / "afile" / "judge"
    message = _one_line_error(capsys, main(["world", "train-judge", str(target), "--steps", "2"]))
    assert message == f"Output folder {target} is not writable (Not a directory); choose another FOLDER."
    assert (tmp_path / "afile").read_text() == "x"
