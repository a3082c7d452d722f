"""The missing-caption policies of `mixkit.data.captions` chosen by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from mixkit.data.captions import MISSING_CAPTION_POLICIES


@pytest.mark.parametrize("file_name, caption", [
    ("003-a red ball.png", "a red ball"),  # A1111's [filewords]: leading numbering dropped
    ("12 blue cube.jpg", "blue cube"),
    ("plain.webp", "plain"),
    ("2024-01-05.png", ""),
])
def test_file_name_policy_captions_as_a1111(file_name, caption):
    assert MISSING_CAPTION_POLICIES.get("file_name")(Path("data") / file_name, "concept", ".txt") == caption


def test_folder_name_and_empty_policies():
    assert MISSING_CAPTION_POLICIES.get("folder_name")(Path("x.png"), "sks dog", ".txt") == "sks dog"
    assert MISSING_CAPTION_POLICIES.get("empty")(Path("x.png"), "sks dog", ".txt") == ""


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-be", "utf-32"])
def test_caption_files_in_unicode_encodings_read_as_their_text(tmp_path, encoding):
    from mixkit.data.captions import read_caption

    data = "sks, café, 猫".encode(encoding)
    if encoding == "utf-16-be":  # Python's utf-16-be writes no byte-order mark; editors that choose it do
        data = b"\xfe\xff" + data
    (tmp_path / "photo.txt").write_bytes(data)
    assert read_caption(tmp_path / "photo.png") == "sks, café, 猫"


def test_a_caption_file_in_a_legacy_encoding_is_refused_naming_it(tmp_path):
    from mixkit.data.captions import CaptionEncodingError, read_caption

    (tmp_path / "photo.txt").write_bytes("sks, café".encode("latin-1"))
    with pytest.raises(CaptionEncodingError, match=r"photo\.txt is not UTF-8 text \(byte 8 is b'\\xe9'.*Save it as UTF-8"):
        read_caption(tmp_path / "photo.png")


def test_a_folder_scan_stops_at_an_undecodable_caption(tmp_path):
    from PIL import Image

    from mixkit.data import scan_kohya_folder
    from mixkit.data.captions import CaptionEncodingError

    concept = tmp_path / "2_sks"
    concept.mkdir()
    Image.new("RGB", (8, 8)).save(concept / "a.png")
    (concept / "a.txt").write_bytes(b"sks, \xff\xfe")  # not a mark at the start: broken UTF-8, not UTF-16
    with pytest.raises(CaptionEncodingError, match="a.txt"):
        scan_kohya_folder(tmp_path)
