"""The shared JSON-object reader: every way a hand-edited settings file can be wrong gives one message shape."""

import pytest

from mixkit.errors import CheckpointFormatError
from mixkit.io.json_object import json_kind, parse_json_object, read_json_object


def test_an_object_is_returned_as_it_is():
    assert parse_json_object('{"steps": 20, "sampler": "Euler a"}', "x", "fix") == {"steps": 20, "sampler": "Euler a"}


@pytest.mark.parametrize("text, kind", [("[1, 2]", "array"), ('"a"', "string"), ("3", "number"), ("2.5", "number"),
                                        ("true", "boolean"), ("null", "null")])
def test_other_json_values_are_named_in_json_terms(text, kind):
    with pytest.raises(ValueError) as caught:
        parse_json_object(text, "settings.json", "fix it.")
    assert str(caught.value) == f"settings.json must hold a JSON object, not a JSON {kind}; fix it."


def test_broken_json_names_the_line_and_the_fix():
    with pytest.raises(ValueError) as caught:
        parse_json_object('{\n  "steps": 20,\n  oops\n}', "settings.json", "fix it.")
    assert str(caught.value) == ("settings.json is not valid JSON (Expecting property name enclosed in double quotes, "
                                 "line 3); fix it.")


def test_the_caller_chooses_the_error_type(tmp_path):
    path = tmp_path / "model_index.json"
    path.write_text("[]", encoding="utf-8")
    with pytest.raises(CheckpointFormatError, match=r"model_index.json \(the index\) must hold a JSON object"):
        read_json_object(path, f"{path.name} (the index)", "re-download it.", CheckpointFormatError)


def test_unreadable_files_are_errors_of_the_callers_type(tmp_path):
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00{")
    with pytest.raises(ValueError, match=r"^binary.json is not UTF-8 text; fix it\.$"):
        read_json_object(binary, "binary.json", "fix it.")
    with pytest.raises(ValueError, match=r"^folder cannot be read \(.*\); fix it\.$"):
        read_json_object(tmp_path, "folder", "fix it.")


def test_json_kind_of_an_object():
    assert json_kind({}) == "object"
