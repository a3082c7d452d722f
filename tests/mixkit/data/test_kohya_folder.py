import logging

import pytest

from mixkit.data import MissingCaptionError, scan_kohya_folder
from mixkit.data.kohya_folder import parse_repeat_folder
from mixkit.errors import UnknownNameError


def test_parse_repeat_folder():
    assert parse_repeat_folder("10_sks dog") == (10, "sks dog")
    assert parse_repeat_folder("3_a_b") == (3, "a_b")
    assert parse_repeat_folder("dogs") is None


def test_repeats_captions_and_tag_frequency(tmp_path, image_writer):
    image_writer(tmp_path / "5_sks dog" / "a.png")
    (tmp_path / "5_sks dog" / "a.txt").write_text("sks dog, red\nsecond line ignored", encoding="utf-8")
    image_writer(tmp_path / "5_sks dog" / "b.jpg", size=(16, 64))
    (tmp_path / "5_sks dog" / "b.txt").write_text("sks dog, blue", encoding="utf-8")
    image_writer(tmp_path / "top.png")
    (tmp_path / "top.txt").write_text("plain", encoding="utf-8")
    report = scan_kohya_folder(tmp_path)
    by_name = {r.path.name: r for r in report.records}
    assert by_name["a.png"].caption == "sks dog, red" and by_name["a.png"].repeats == 5
    assert by_name["b.jpg"].concept == "sks dog" and (by_name["b.jpg"].width, by_name["b.jpg"].height) == (16, 64)
    assert "top.png" not in by_name  # beside the repeat folders: ignored, as kohya (test_kohya_folder_root_images.py)
    assert report.tag_frequency()["5_sks dog"] == {"sks dog": 2, "red": 1, "blue": 1}  # kohya's key: the folder name
    assert report.dataset_dirs()["5_sks dog"] == {"n_repeats": 5, "img_count": 2}


def test_missing_caption_policies(tmp_path, image_writer, caplog):
    image_writer(tmp_path / "2_red cube" / "x.png")
    with caplog.at_level(logging.WARNING):
        report = scan_kohya_folder(tmp_path)
    assert report.records[0].caption == "red cube"
    assert "x.png" in caplog.text and "no .txt caption" in caplog.text
    assert scan_kohya_folder(tmp_path, missing_captions="empty").records[0].caption == ""
    with pytest.raises(MissingCaptionError, match="x.png"):
        scan_kohya_folder(tmp_path, missing_captions="error")
    with pytest.raises(UnknownNameError, match="folder_name"):
        scan_kohya_folder(tmp_path, missing_captions="guess")


def test_corrupt_image_in_the_middle_is_skipped_and_reported(tmp_path, image_writer):
    image_writer(tmp_path / "1_c" / "a.png")
    (tmp_path / "1_c" / "b.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 10)
    image_writer(tmp_path / "1_c" / "c.png")
    report = scan_kohya_folder(tmp_path, missing_captions="empty")
    assert [r.path.name for r in report.records] == ["a.png", "c.png"]
    assert [p.name for p, _ in report.skipped] == ["b.png"]


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        scan_kohya_folder(tmp_path / "nope")


def test_caption_extension_reads_kohyas_caption_files(tmp_path, image_writer, caplog):
    image_writer(tmp_path / "2_other" / "d16.png")
    (tmp_path / "2_other" / "d16.caption").write_text("a grey disc", encoding="utf-8")
    (tmp_path / "2_other" / "d16.txt").write_text("from the txt file", encoding="utf-8")
    assert scan_kohya_folder(tmp_path, caption_extension=".caption").records[0].caption == "a grey disc"
    assert scan_kohya_folder(tmp_path).records[0].caption == "from the txt file"  # mixkit's default stays .txt
    image_writer(tmp_path / "2_other" / "e.png")
    with caplog.at_level(logging.WARNING):
        report = scan_kohya_folder(tmp_path, caption_extension=".caption")
    assert [r.caption for r in report.records] == ["a grey disc", "other"]
    assert "e.png has no .caption caption" in caplog.text
    # The error names the file it looked for, with the extension in use (it used to name e.txt whatever was asked).
    with pytest.raises(MissingCaptionError, match=r"e.png has no caption file 'e.caption' \(caption_extension="
                                                  r"'.caption'\); write one, set caption_extension"):
        scan_kohya_folder(tmp_path, missing_captions="error", caption_extension=".caption")
    with pytest.raises(MissingCaptionError, match="no caption file 'e.txt'.*like '.caption'"):
        scan_kohya_folder(tmp_path, missing_captions="error")


@pytest.mark.parametrize("extension, message", [("txt", "must be a file extension starting with a dot"),
                                                (".", "must be a file extension"), (3, "must be a file extension"),
                                                (".PNG", "is an image suffix")])
def test_bad_caption_extensions_are_refused(tmp_path, image_writer, extension, message):
    image_writer(tmp_path / "a.png")
    with pytest.raises(ValueError, match=message):
        scan_kohya_folder(tmp_path, caption_extension=extension)


def test_tag_frequency_counts_as_kohya(tmp_path, image_writer):
    # kohya's set_tag_frequency: stripped, lower-cased, every occurrence; repeats of the folder do not multiply.
    for name, caption in (("a", "Red, red, smile"), ("b", "red"), ("c", " , ")):
        image_writer(tmp_path / "3_x" / f"{name}.png")
        (tmp_path / "3_x" / f"{name}.txt").write_text(caption, encoding="utf-8")
    assert scan_kohya_folder(tmp_path).tag_frequency() == {"3_x": {"red": 3, "smile": 1}}
