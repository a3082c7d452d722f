import json

import pytest

from mixkit.data import scan_jsonl_manifest
from mixkit.data.jsonl_manifest import manifest_entry


def test_reads_relative_paths_aliases_and_repeats(tmp_path, image_writer):
    image_writer(tmp_path / "img" / "a.png")
    image_writer(tmp_path / "img" / "b.png")
    lines = [{"image": "img/a.png", "text": "a red square"}, {"image": "img/b.png", "caption": "b", "repeats": 3},
             {"image": "img/missing.png", "text": "gone"}]
    manifest = tmp_path / "data.jsonl"
    manifest.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")
    report = scan_jsonl_manifest(manifest)
    assert [(r.path.name, r.caption, r.repeats) for r in report.records] == [("a.png", "a red square", 1), ("b.png", "b", 3)]
    assert report.skipped[0][0].name == "missing.png"


@pytest.mark.parametrize("line, message", [
    ("{not json", "line 1 is not valid JSON"),
    ('{"text": "x"}', "'image' key"),
    ('{"image": "a.png"}', "'text'"),
    ('{"image": "a.png", "text": "x", "repeats": 0}', "repeats"),
])
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(line, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        scan_jsonl_manifest(manifest)
    assert "m.jsonl" in str(info.value)


def test_a_manifest_entry_is_a_json_object_with_an_image_path_and_errors_show_the_callers_example():
    example = '{"image": "a.png", "question": "what colour?", "answer": "red"}'
    assert manifest_entry('{"image": "a.png", "answer": "red"}', "m.jsonl, line 4", example) == {
        "image": "a.png", "answer": "red"}
    with pytest.raises(ValueError) as info:
        manifest_entry('["a.png"]', "m.jsonl, line 4", example)
    assert str(info.value) == f"m.jsonl, line 4 needs an 'image' key with a path string, like {example}."
    with pytest.raises(ValueError) as info:
        manifest_entry('{"image": 3}', "m.jsonl, line 5", example)
    assert str(info.value).startswith("m.jsonl, line 5 needs an 'image' key")
    with pytest.raises(ValueError) as info:
        manifest_entry("{not json", "m.jsonl, line 6", example)
    assert str(info.value).startswith("m.jsonl, line 6 is not valid JSON (")
    assert str(info.value).endswith("); each line must be one JSON object.")
