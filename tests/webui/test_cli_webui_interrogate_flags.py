"""`mixkit webui --interrogate-categories-dir / --interrogate-clip-model / --deepdanbooru-models-path`: bad values
refused before any model loads."""

from __future__ import annotations

import pytest

from webui.cli import main


@pytest.fixture
def no_model_load(monkeypatch):
    from pipelines.txt2img import TextToImage

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the flag check")

    monkeypatch.setattr(TextToImage, "from_pretrained", refuse)


def last_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and "Traceback" not in "\n".join(lines)
    return lines[-1]


def test_a_missing_categories_folder_is_named(tmp_path, capsys, no_model_load):
    code = main(["webui", "--interrogate-categories-dir", str(tmp_path / "nope"), "--output-dir", str(tmp_path / "o")])
    assert code == 2
    assert last_error_line(capsys).startswith("mixkit: error: --interrogate-categories-dir: ")


def test_an_empty_word_list_is_named(tmp_path, capsys, no_model_load):
    (tmp_path / "lists").mkdir()
    (tmp_path / "lists" / "mediums.txt").write_text("\n", encoding="utf-8")
    code = main(["webui", "--interrogate-categories-dir", str(tmp_path / "lists"), "--output-dir", str(tmp_path / "o")])
    assert code == 2 and "mediums.txt' is empty" in last_error_line(capsys)


def test_an_empty_clip_model_name_is_refused(tmp_path, capsys, no_model_load):
    assert main(["webui", "--interrogate-clip-model", " ", "--output-dir", str(tmp_path / "o")]) == 2
    assert "--interrogate-clip-model must name a CLIP model" in last_error_line(capsys)


def test_a_missing_deepdanbooru_folder_is_named(tmp_path, capsys, no_model_load):
    code = main(["webui", "--deepdanbooru-models-path", str(tmp_path / "nope"), "--output-dir", str(tmp_path / "o")])
    assert code == 2
    assert last_error_line(capsys) == (f"mixkit: error: --deepdanbooru-models-path {str(tmp_path / 'nope')!r} is not "
                                       "a folder; create it or fix the path.")


def test_the_deepdanbooru_folder_reaches_the_server_config(tmp_path):
    import argparse

    from webui.cli.webui import add_parser, config_from_args

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["webui", "--deepdanbooru-models-path", str(tmp_path), "--output-dir", str(tmp_path)])
    assert config_from_args(args).deepdanbooru_models_path == str(tmp_path)
