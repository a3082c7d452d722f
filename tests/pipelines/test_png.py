"""PNG saving with infotext chunks, atomic writes, A1111 file naming and reading infotext back."""

from __future__ import annotations

import os
import struct
import zlib

import pytest
from PIL import Image

from pipelines.infotext_read import decode_user_comment, read_infotext
from pipelines.png import next_image_path, save_png

LATIN1_TEXT = "café crème, 1girl\nNegative prompt: lowres\nSteps: 20, Sampler: Euler a, CFG scale: 7, Seed: 1, Size: 8x8"
UNICODE_TEXT = "桜の木, 🤖\nNegative prompt: 低品質\nSteps: 20, Sampler: Euler a, CFG scale: 7, Seed: 2, Size: 8x8"


def tiny_image(mode: str = "RGB") -> Image.Image:
    image = Image.new(mode, (8, 8))
    image.putpixel((3, 4), (255, 0, 0) if mode == "RGB" else 200)
    return image


def png_chunks(path) -> list[tuple[bytes, bytes]]:
    """(type, data) of every chunk, read by hand so the test does not trust Pillow's parser."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert crc == zlib.crc32(kind + body)
        chunks.append((kind, body))
        offset += 12 + length
    return chunks


def test_latin1_infotext_is_a_plain_text_chunk(tmp_path):
    path = save_png(tiny_image(), tmp_path / "a.png", LATIN1_TEXT)
    text_chunks = [(kind, body) for kind, body in png_chunks(path) if kind in (b"tEXt", b"iTXt", b"zTXt")]
    assert text_chunks == [(b"tEXt", b"parameters\x00" + LATIN1_TEXT.encode("latin-1"))]
    with Image.open(path) as image:
        assert image.text == {"parameters": LATIN1_TEXT}
    assert read_infotext(path) == LATIN1_TEXT


def test_non_latin1_infotext_is_an_uncompressed_utf8_itxt_chunk(tmp_path):
    path = save_png(tiny_image(), tmp_path / "u.png", UNICODE_TEXT)
    text_chunks = [(kind, body) for kind, body in png_chunks(path) if kind in (b"tEXt", b"iTXt", b"zTXt")]
    # iTXt: keyword NUL, compression flag 0, method 0, empty language tag NUL, empty translated keyword NUL, UTF-8
    assert text_chunks == [(b"iTXt", b"parameters\x00\x00\x00\x00\x00" + UNICODE_TEXT.encode("utf-8"))]
    assert read_infotext(path) == UNICODE_TEXT
    assert type(read_infotext(path)) is str


def test_saved_file_gets_ordinary_permissions(tmp_path):
    umask = os.umask(0o022)
    try:
        path = save_png(tiny_image(), tmp_path / "p.png", LATIN1_TEXT)
    finally:
        os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o644


def test_text_chunk_comes_before_image_data(tmp_path):
    kinds = [kind for kind, _ in png_chunks(save_png(tiny_image(), tmp_path / "o.png", LATIN1_TEXT))]
    assert kinds.index(b"tEXt") < kinds.index(b"IDAT")


def test_pixels_survive_and_no_chunk_without_infotext(tmp_path):
    image = tiny_image("RGB")
    path = save_png(image, tmp_path / "plain.png", None)
    assert not [kind for kind, _ in png_chunks(path) if kind in (b"tEXt", b"iTXt", b"zTXt")]
    with Image.open(path) as loaded:
        assert loaded.mode == "RGB" and list(loaded.getdata()) == list(image.getdata())
    assert read_infotext(path) is None


def test_save_creates_missing_output_folder_and_replaces_existing_file(tmp_path):
    path = tmp_path / "out" / "nested" / "00000-1.png"
    save_png(tiny_image(), path, LATIN1_TEXT)
    save_png(tiny_image(), path, UNICODE_TEXT)
    assert read_infotext(path) == UNICODE_TEXT
    assert os.listdir(path.parent) == ["00000-1.png"]


def test_folder_under_a_regular_file_is_a_clear_error_and_writes_nothing(tmp_path):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    with pytest.raises(NotADirectoryError, match="not_a_folder"):
        save_png(tiny_image(), blocker / "sub" / "a.png", LATIN1_TEXT)
    with pytest.raises(NotADirectoryError, match="not_a_folder"):
        save_png(tiny_image(), blocker / "a.png", LATIN1_TEXT)
    assert sorted(os.listdir(tmp_path)) == ["not_a_folder"]
    assert blocker.read_text() == "x"


def test_unwritable_folder_is_a_permission_error_naming_it(tmp_path, monkeypatch):
    # Tests run as root, where chmod does not block writes: make the OS refuse the file instead.
    real_open = os.open

    def refuse(path, *args, **kwargs):
        if str(path).startswith(str(tmp_path)):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(PermissionError, match=f"{tmp_path}.*not writable"):
        save_png(tiny_image(), tmp_path / "a.png", LATIN1_TEXT)
    assert os.listdir(tmp_path) == []


def test_failure_mid_write_leaves_no_partial_or_temp_file_and_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "keep.png"
    save_png(tiny_image(), target, LATIN1_TEXT)
    before = target.read_bytes()

    def broken_save(self, fp, *args, **kwargs):
        fp.write(b"\x89PNG partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Image.Image, "save", broken_save)
    with pytest.raises(OSError, match="No space left"):
        save_png(tiny_image(), target, UNICODE_TEXT)
    with pytest.raises(OSError, match="No space left"):
        save_png(tiny_image(), tmp_path / "new.png", UNICODE_TEXT)
    assert os.listdir(tmp_path) == ["keep.png"]
    assert target.read_bytes() == before


@pytest.mark.parametrize(("kwargs", "error", "fragment"), [
    ({"image": "not an image"}, TypeError, "PIL.Image.Image"),
    ({"infotext": b"bytes"}, TypeError, "infotext must be a str or None"),
    ({"path": "a.jpg"}, ValueError, "must end in .png"),
])
def test_save_png_rejects_bad_arguments(tmp_path, kwargs, error, fragment):
    arguments = {"image": tiny_image(), "path": "a.png", "infotext": LATIN1_TEXT, **kwargs}
    arguments["path"] = tmp_path / arguments["path"]
    with pytest.raises(error, match=fragment):
        save_png(**arguments)
    assert os.listdir(tmp_path) == []


def test_save_png_refuses_a_folder_as_target(tmp_path):
    (tmp_path / "d.png").mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        save_png(tiny_image(), tmp_path / "d.png", None)


def test_next_image_path_counts_like_a1111(tmp_path):
    assert next_image_path(tmp_path / "missing", 1234) == tmp_path / "missing" / "00000-1234.png"
    assert next_image_path(tmp_path, 1234) == tmp_path / "00000-1234.png"
    for name in ["00000-1234.png", "00007-55.png", "00003.png", "00012-9.txt", "grid-0001.png", "notes.txt", ".00099-1.tmp"]:
        (tmp_path / name).write_bytes(b"")
    # highest counter among "NNNNN-..." and "NNNNN.ext" names is 12; hidden temp files do not count
    assert next_image_path(tmp_path, 42) == tmp_path / "00013-42.png"
    (tmp_path / "123456-1.png").write_bytes(b"")
    assert next_image_path(tmp_path, 0) == tmp_path / "123457-0.png"


def test_next_image_path_then_save_never_overwrites(tmp_path):
    paths = []
    for seed in (5, 5, 6):
        path = next_image_path(tmp_path, seed)
        save_png(tiny_image(), path, LATIN1_TEXT)
        paths.append(path.name)
    assert paths == ["00000-5.png", "00001-5.png", "00002-6.png"]


@pytest.mark.parametrize(("seed", "error"), [(-1, ValueError), (1.5, TypeError), (True, TypeError), ("7", TypeError)])
def test_next_image_path_rejects_bad_seeds(tmp_path, seed, error):
    with pytest.raises(error, match="seed"):
        next_image_path(tmp_path, seed)


def test_next_image_path_rejects_a_file_as_folder(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectoryError, match="f' exists and is not a folder"):
        next_image_path(tmp_path / "f", 1)


def test_read_infotext_from_jpeg_exif_written_like_a1111(tmp_path):
    import piexif  # A1111's own EXIF writer, the oracle here (test extra: piexif)
    import piexif.helper

    path = tmp_path / "a.jpg"
    tiny_image().save(path, format="JPEG", quality=90)
    # A1111 `modules/images.py`: piexif.dump of UserComment with encoding="unicode", then piexif.insert
    exif = piexif.dump({"Exif": {piexif.ExifIFD.UserComment: piexif.helper.UserComment.dump(UNICODE_TEXT, encoding="unicode")}})
    piexif.insert(exif, str(path))
    assert read_infotext(path) == UNICODE_TEXT


def test_read_infotext_from_webp_exif(tmp_path):
    exif = Image.Exif()
    exif.get_ifd(0x8769)[0x9286] = b"UNICODE\x00" + LATIN1_TEXT.encode("utf-16-be")
    path = tmp_path / "a.webp"
    tiny_image().save(path, format="WEBP", exif=exif)
    assert read_infotext(path) == LATIN1_TEXT
    with Image.open(path) as image:
        assert read_infotext(image) == LATIN1_TEXT


def test_jpeg_without_exif_has_no_infotext(tmp_path):
    path = tmp_path / "b.jpg"
    tiny_image().save(path, format="JPEG")
    assert read_infotext(path) is None


@pytest.mark.parametrize(("raw", "expected"), [
    (b"UNICODE\x00" + "héllo 桜".encode("utf-16-be"), "héllo 桜"),
    (b"UNICODE\x00" + "hello".encode("utf-16-le"), "hello"),
    (b"ASCII\x00\x00\x00plain\x00", "plain"),
    (b"JIS\x00\x00\x00\x00\x00" + "桜".encode("shift_jis"), "桜"),
    (b"\x00" * 8 + b"unknown", None),
    (b"UNICODE\x00", None),
    ("already text", "already text"),
])
def test_decode_user_comment(raw, expected):
    assert decode_user_comment(raw) == expected


def test_read_infotext_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.png"):
        read_infotext(tmp_path / "nope.png")
    with pytest.raises(ValueError, match="is a folder"):
        read_infotext(tmp_path)
    (tmp_path / "t.png").write_text("not a png")
    with pytest.raises(ValueError, match="t.png.*not an image"):
        read_infotext(tmp_path / "t.png")
    good = save_png(tiny_image(), tmp_path / "g.png", LATIN1_TEXT).read_bytes()
    (tmp_path / "cut.png").write_bytes(good[: len(good) - 30])
    with pytest.raises(ValueError, match="cut.png.*damaged or truncated"):
        read_infotext(tmp_path / "cut.png")
    with pytest.raises(TypeError, match="path or a PIL image"):
        read_infotext(42)


def test_read_infotext_turns_a_decompression_bomb_into_a_value_error(tmp_path, monkeypatch):
    path = save_png(tiny_image(), tmp_path / "bomb.png", LATIN1_TEXT)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10)  # 8x8 = 64 pixels > 2 * 10: Pillow refuses it
    with pytest.raises(ValueError, match="bomb.png.*decompression-bomb"):
        read_infotext(path)


def racing_listing(monkeypatch, taken):
    """`next_image_path` answering first with `taken`, a name another writer filled after this one listed the folder,
    then as usual."""
    import pipelines.png

    real, answers = pipelines.png.next_image_path, [taken]
    monkeypatch.setattr(pipelines.png, "next_image_path",
                        lambda folder, seed: answers.pop() if answers else real(folder, seed))


def test_a_counter_name_another_writer_took_meanwhile_is_not_overwritten(tmp_path, monkeypatch):
    """Two writers listing the folder at once picked the same 00000-5.png and os.replace dropped the first image."""
    from pipelines.generation import GenerationResult

    theirs = tmp_path / "00000-5.png"
    save_png(tiny_image(), theirs, "theirs")
    before = theirs.read_bytes()
    racing_listing(monkeypatch, theirs)
    result = GenerationResult()
    result.add(tiny_image("L").convert("RGB"), 5, "ours")
    assert result.save(tmp_path) == [tmp_path / "00001-5.png"]
    assert theirs.read_bytes() == before
    assert read_infotext(tmp_path / "00001-5.png") == "ours"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000-5.png", "00001-5.png"]  # no temporary file left


@pytest.mark.parametrize("taken", [True, False])
def test_without_hard_links_a_free_name_is_still_checked_before_the_rename(tmp_path, monkeypatch, taken):
    from pipelines.png import publish_file

    def no_links(*args):
        raise PermissionError("hard links are not supported here")

    monkeypatch.setattr(os, "link", no_links)
    temp, target = tmp_path / ".t.tmp", tmp_path / "00000-1.png"
    temp.write_bytes(b"new")
    if taken:
        target.write_bytes(b"old")
        with pytest.raises(FileExistsError):
            publish_file(temp, target, replace=False)
        assert target.read_bytes() == b"old"
    else:
        publish_file(temp, target, replace=False)
        assert target.read_bytes() == b"new" and not temp.exists()


def test_pnginfo_off_writes_no_parameters_chunk(tmp_path):
    from pipelines.png import InfotextWriting

    path = save_png(tiny_image(), tmp_path / "a.png", LATIN1_TEXT, writing=InfotextWriting(pnginfo=False))
    assert [kind for kind, _ in png_chunks(path) if kind in (b"tEXt", b"iTXt", b"zTXt")] == []
    assert read_infotext(path) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png"]  # no .txt by default either


def test_save_txt_writes_the_infotext_and_a_line_break_in_utf8_beside_the_png(tmp_path):
    from pipelines.png import InfotextWriting

    path = save_png(tiny_image(), tmp_path / "b.png", UNICODE_TEXT, writing=InfotextWriting(txt=True))
    assert (tmp_path / "b.txt").read_bytes() == (UNICODE_TEXT + "\n").encode("utf-8")  # A1111's save_txt form
    assert read_infotext(path) == UNICODE_TEXT  # the PNG keeps its chunk too
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.png", "b.txt"]  # no temporary file left
    only_txt = save_png(tiny_image(), tmp_path / "c.png", LATIN1_TEXT, writing=InfotextWriting(pnginfo=False, txt=True))
    assert read_infotext(only_txt) is None and (tmp_path / "c.txt").read_text(encoding="utf-8") == LATIN1_TEXT + "\n"


def test_save_txt_writes_no_text_file_for_an_image_without_infotext(tmp_path):
    from pipelines.png import InfotextWriting

    save_png(tiny_image(), tmp_path / "d.png", None, writing=InfotextWriting(txt=True))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.png"]


def test_a_text_file_that_cannot_be_written_leaves_no_png_behind(tmp_path):
    from pipelines.png import InfotextWriting

    (tmp_path / "e.txt").mkdir()  # the .txt name is taken by a folder: os.replace fails
    with pytest.raises(OSError):
        save_png(tiny_image(), tmp_path / "e.png", LATIN1_TEXT, writing=InfotextWriting(txt=True))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.txt"]  # neither the PNG nor a temporary file


def test_numbered_saves_with_text_files_count_on_past_them(tmp_path):
    from pipelines.png import InfotextWriting, save_png_numbered

    writing = InfotextWriting(txt=True)
    first = save_png_numbered(tiny_image(), tmp_path, 7, LATIN1_TEXT, writing=writing)
    second = save_png_numbered(tiny_image(), tmp_path, 7, UNICODE_TEXT, writing=writing)
    assert (first.name, second.name) == ("00000-7.png", "00001-7.png")
    assert (tmp_path / "00001-7.txt").read_text(encoding="utf-8") == UNICODE_TEXT + "\n"


def test_infotext_writing_refuses_non_bool_switches(tmp_path):
    from pipelines.png import InfotextWriting

    with pytest.raises(TypeError, match="InfotextWriting.pnginfo must be True or False, got 'no'"):
        InfotextWriting(pnginfo="no")
    with pytest.raises(TypeError, match="writing must be an InfotextWriting, got dict"):
        save_png(tiny_image(), tmp_path / "f.png", LATIN1_TEXT, writing={"txt": True})
    assert not list(tmp_path.iterdir())
