"""`mixkit tiny-model DIR` refuses a taken output before building anything (one-line error, exit code 2)."""

from webui.cli import main


def test_a_filled_folder_or_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("keep")
    (tmp_path / "a-file").write_text("keep")
    for target in ("taken", "a-file"):
        assert main(["tiny-model", str(tmp_path / target)]) == 2
        err = capsys.readouterr().err
        assert "already exists and is not an empty folder" in err and "Traceback" not in err
    assert (tmp_path / "taken" / "notes.txt").read_text() == (tmp_path / "a-file").read_text() == "keep"
