"""Grid legend fonts (pipelines/grid_fonts.py): A1111's `font` option, the system-font search and per-label glyph
coverage, as draw_grid_annotations uses them."""

import hashlib
import logging
import os
import shutil

import pytest
from PIL import Image, ImageDraw

from pipelines import grid_fonts
from pipelines.grid_annotations import GridAnnotation, draw_grid_annotations, grid_font, wrap_text
from pipelines.grid_fonts import check_font, grid_faces, has_glyph, label_face, missing_glyphs

DEJAVU_DIR = "/usr/share/fonts/truetype/dejavu"
DEJAVU = os.path.join(DEJAVU_DIR, "DejaVuSans.ttf")
NO_CYRILLIC = os.path.join(DEJAVU_DIR, "DejaVuMathTeXGyre.ttf")  # Latin and Greek, no Cyrillic
BOX = "\uffff"  # a noncharacter: every font draws its unknown-glyph box for it
needs_dejavu = pytest.mark.skipif(not os.path.isfile(DEJAVU), reason="DejaVu Sans is not installed here")


@pytest.fixture(autouse=True)
def fresh_caches():
    grid_fonts.clear_font_caches()
    yield
    grid_fonts.clear_font_caches()


def no_system_fonts(monkeypatch):
    monkeypatch.setattr(grid_fonts, "system_font_paths", lambda: ())


def only_system_fonts(monkeypatch, *paths):
    monkeypatch.setattr(grid_fonts, "system_font_paths", lambda: tuple(paths))


def _grid(cols=1, rows=1, size=100):
    return Image.new("RGB", (cols * size, rows * size), (40, 90, 160))


def top_label(text: str, font=None, size: int = 100):
    """The top pad of a one-cell grid labelled `text` (the drawn label, nothing else)."""
    out = draw_grid_annotations(_grid(size=size), size, size, [[GridAnnotation(text)]], [[GridAnnotation()]],
                                font=font)
    return out.crop((0, 0, out.width, out.height - size))


@needs_dejavu
def test_dejavu_reports_cyrillic_and_greek_glyphs_that_pillows_font_lacks():
    assert has_glyph(DEJAVU, "Ж") and has_glyph(DEJAVU, "λ") and has_glyph(DEJAVU, "A")
    assert not has_glyph(None, "Ж") and not has_glyph(None, "λ") and has_glyph(None, "A")
    assert not has_glyph(DEJAVU, BOX) and not has_glyph(NO_CYRILLIC, "Ж") and has_glyph(NO_CYRILLIC, "λ")
    assert missing_glyphs(None, "Жар-птица λ") == frozenset("Жар-птица λ") - {"-", " "}
    assert missing_glyphs(DEJAVU, "Жар-птица λ\n") == frozenset()  # spaces and line breaks need no glyph


@needs_dejavu
def test_a_cyrillic_label_in_dejavu_draws_the_glyph_not_the_unknown_glyph_box(monkeypatch):
    no_system_fonts(monkeypatch)
    drawn, box = top_label("Ж", font=DEJAVU), top_label(BOX, font=DEJAVU)
    assert (drawn.size, drawn.tobytes()) != (box.size, box.tobytes())
    # the oracle can tell: Pillow's font has no Ж, and draws it exactly as its box
    assert top_label("Ж").tobytes() == top_label(BOX).tobytes()
    greek, greek_box = top_label("λ", font=DEJAVU), top_label(BOX, font=DEJAVU)
    assert greek.tobytes() != greek_box.tobytes()


@needs_dejavu
def test_without_a_font_a_label_pillow_cannot_draw_gets_a_system_font_that_can(monkeypatch):
    only_system_fonts(monkeypatch, NO_CYRILLIC, DEJAVU)  # the first lacks Cyrillic: skipped for that label
    assert label_face("Жар-птица") == DEJAVU
    assert label_face("λόγος") == NO_CYRILLIC  # the first system font with every glyph
    assert label_face("Steps: 20") is None  # ASCII stays in Pillow's font, as before
    assert top_label("Жар-птица").tobytes() == top_label("Жар-птица", font=DEJAVU).tobytes()


@needs_dejavu
def test_a_system_font_freetype_cannot_load_is_passed_over(monkeypatch, tmp_path):
    broken = tmp_path / "NotoSans-Regular.ttf"
    broken.write_bytes(b"\x00\x01\x00\x00 truncated")
    only_system_fonts(monkeypatch, str(broken), DEJAVU)
    assert label_face("Жар") == DEJAVU and grid_faces(["cat", "Жар"]) == [DEJAVU, DEJAVU]


@needs_dejavu
def test_a_chosen_font_is_used_unless_it_lacks_a_labels_glyphs(monkeypatch):
    only_system_fonts(monkeypatch, DEJAVU)
    assert label_face("Steps: 20", NO_CYRILLIC) == NO_CYRILLIC and label_face("λ", NO_CYRILLIC) == NO_CYRILLIC
    assert label_face("Жар", NO_CYRILLIC) == DEJAVU  # falls back per label
    no_system_fonts(monkeypatch)
    assert label_face("Жар", NO_CYRILLIC) == NO_CYRILLIC  # nothing better: the chosen font, boxes and all


@needs_dejavu
def test_one_font_for_the_whole_grid_when_one_has_every_labels_glyphs(monkeypatch):
    only_system_fonts(monkeypatch, NO_CYRILLIC, DEJAVU)
    assert grid_faces(["cat", "кошка"]) == [DEJAVU, DEJAVU]  # not "cat" in Pillow's font beside DejaVu
    assert grid_faces(["cat", "dog"]) == [None, None]
    assert grid_faces(["λ", "猫"]) == [NO_CYRILLIC, None]  # no font has 猫: that label alone keeps Pillow's


@needs_dejavu
def test_partial_coverage_picks_the_font_with_most_glyphs_and_logs_the_rest_once(monkeypatch, caplog):
    only_system_fonts(monkeypatch, NO_CYRILLIC, DEJAVU)
    with caplog.at_level(logging.WARNING, logger="pipelines.grid_fonts"):
        assert label_face("猫 кошка") == DEJAVU  # draws the Cyrillic at least
        assert label_face("猫 кошка") == DEJAVU
        label_face("猫!")
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1 and "猫 (U+732B)" in warnings[0] and "кошка" in warnings[0]


GOLDEN_LABELS = ([[GridAnnotation("Жар-птица λόγος")],
                  [GridAnnotation("cat", is_active=False), GridAnnotation("a long label that wraps and shrinks")]],
                 [[GridAnnotation("Ω row")], [GridAnnotation("")]])
# sha256 of that grid's pixels as main drew it before fonts were chosen (Pillow 12.3's bundled font; a Pillow
# release that changes its font or rasterizer changes it too)
GOLDEN_SHA256 = "0cfab180d20e55c7527aa7d53e53f43bbfc614b1d0e7023ff9dd311ec0a51af1"


def test_with_no_system_font_the_output_is_byte_identical_to_pillows_font(monkeypatch, caplog):
    no_system_fonts(monkeypatch)
    grid = Image.new("RGB", (200, 200), (90, 120, 200))
    with caplog.at_level(logging.WARNING, logger="pipelines.grid_fonts"):
        out = draw_grid_annotations(grid, 100, 100, *GOLDEN_LABELS, margin=4)
    assert out.size == (279, 237) and hashlib.sha256(out.tobytes()).hexdigest() == GOLDEN_SHA256
    logged = " ".join(record.getMessage() for record in caplog.records)
    assert "Ж (U+0416)" in logged and "Ω (U+03A9)" in logged and "(U+0063)" not in logged  # "c" was drawn


def test_a_missing_font_file_is_refused_naming_it(tmp_path):
    missing = tmp_path / "Roboto.ttf"
    with pytest.raises(ValueError, match=f"font '{missing}' is not a file; give the path of a .ttf"):
        check_font(str(missing))
    with pytest.raises(ValueError, match="font .* is not a file"):
        draw_grid_annotations(_grid(), 100, 100, [[GridAnnotation("x")]], [[GridAnnotation()]], font=str(missing))
    with pytest.raises(ValueError, match="--grid-font .* is not a file"):
        check_font(str(tmp_path), "--grid-font")  # a folder


def test_a_file_freetype_cannot_load_is_refused_naming_it(tmp_path):
    fake = tmp_path / "notes.ttf"
    fake.write_text("not a font")
    with pytest.raises(ValueError, match=f"font '{fake}' is not a font Pillow's FreeType can load"):
        check_font(fake)
    with pytest.raises(ValueError, match="must be the path of a .ttf, .otf or .ttc font file"):
        check_font(12)
    assert check_font("") is None and check_font(None) is None


@needs_dejavu
def test_wrapping_and_shrinking_work_with_a_truetype_font(monkeypatch):
    no_system_fonts(monkeypatch)
    draw = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    text = "очень длинная подпись которая не помещается в одну строку"
    lines = wrap_text(draw, text, grid_font(8, DEJAVU), 60)
    assert len(lines) > 1 and " ".join(lines) == text
    assert all(draw.textlength(line, font=grid_font(8, DEJAVU)) <= 60 for line in lines if " " in line)
    one = top_label("кот", font=DEJAVU)
    many = top_label(text, font=DEJAVU)
    assert many.height > one.height
    # one word too wide for its column at the legend's size (8 px) is drawn smaller, inside its column
    word = "Жарптицажарптицажарптица"
    assert draw.textlength(word, font=grid_font(8, DEJAVU)) > 100
    out = draw_grid_annotations(_grid(2, 1), 100, 100, [[GridAnnotation(word)], [GridAnnotation()]],
                                [[GridAnnotation()]], font=DEJAVU)
    pad = out.crop((0, 0, 200, out.height - 100)).convert("L")
    inked = [x for x in range(200) for y in range(pad.height) if pad.getpixel((x, y)) < 250]
    assert inked and max(inked) < 100


def test_the_system_font_search_finds_preferred_files_and_runs_once(monkeypatch, tmp_path):
    if not os.path.isfile(DEJAVU):
        pytest.skip("DejaVu Sans is not installed here")
    (tmp_path / "sub").mkdir()
    shutil.copy(DEJAVU, tmp_path / "sub" / "DejaVuSans.ttf")
    (tmp_path / "broken.ttf").write_text("not a font")
    (tmp_path / "readme.txt").write_text("")
    calls = []
    monkeypatch.setattr(grid_fonts, "font_folders", lambda: [str(tmp_path), str(tmp_path / "absent")])
    monkeypatch.setattr(grid_fonts, "_fontconfig_fallbacks", lambda: calls.append(1) or [str(tmp_path / "broken.ttf")])
    found = (str(tmp_path / "sub" / "DejaVuSans.ttf"), str(tmp_path / "broken.ttf"))
    assert grid_fonts.system_font_paths() == found
    assert label_face("Жар") == found[0] and label_face("λ") == found[0]  # a file FreeType cannot load has no glyphs
    grid_fonts.system_font_paths()
    top_label("Жар")
    assert calls == [1]  # cached: a plot does not search again per label


def test_fontconfig_fallbacks_keep_regular_upright_fonts(monkeypatch):
    class Listed:
        stdout = "/f/DejaVuSans.ttf\n/f/DejaVuSans-Bold.ttf\n/f/NotoSansCJK-Regular.ttc\n/f/X-Italic.otf\n/f/a.pcf.gz\n"

    monkeypatch.setattr(grid_fonts.shutil, "which", lambda name: "/usr/bin/fc-match")
    monkeypatch.setattr(grid_fonts.subprocess, "run", lambda *args, **kwargs: Listed())
    assert grid_fonts._fontconfig_fallbacks() == ["/f/DejaVuSans.ttf", "/f/NotoSansCJK-Regular.ttc"]
    monkeypatch.setattr(grid_fonts.shutil, "which", lambda name: None)
    assert grid_fonts._fontconfig_fallbacks() == []
