import json

import pytest

from mixkit.data import scan_jsonl_manifest


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
