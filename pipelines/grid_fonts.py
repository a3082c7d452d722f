"""Which font draws a grid label: A1111's `font` setting, else a system font that has the label's glyphs.

A1111 draws its legends in the font its `font` option names (Settings > Saving images/grids; empty = its bundled
Roboto). Pillow's bundled font (Aileron), which mixkit draws with, has hardly a glyph outside ASCII (not "é"): a
Cyrillic, Greek, CJK or accented label drew as boxes. So a label is drawn in, in this order:
the chosen `font` (if any; else Pillow's font) when it has a glyph for every character of the label, else the first
system font `system_font_paths` finds that has them all (DejaVu Sans, Noto Sans, Arial Unicode, Microsoft YaHei, ...,
then fontconfig's own fallback list), else the one that has the most (so "猫 кошка" with only DejaVu installed draws
its Cyrillic at least); the characters nothing could draw are logged once. `grid_faces` keeps one font for a whole
grid where one fits every label, so a legend does not mix fonts needlessly. An ASCII-only legend without a `font`, and
any legend on a machine without system fonts, is drawn exactly as before (Pillow's font).

Coverage is read from the glyphs FreeType renders: a character the font lacks renders as its ".notdef" glyph, the
same bitmap as a noncharacter (U+FFFF) that no font maps. That needs no fontTools and costs one small rendering per
(font, character), cached, as is the font search (done once per process; `clear_font_caches` redoes it).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
import unicodedata
from typing import Sequence

logger = logging.getLogger(__name__)

OPTION_NAME = "font"  # A1111's option key (and the scripts' context key)
FONT_SUFFIXES = (".ttf", ".otf", ".ttc")
# Preferred fonts by file name (lower case), broadest Unicode coverage first, then per-script ones; the first that
# has every glyph of a label draws it. DejaVu Sans: Latin, Greek, Cyrillic and more, on most Linux systems.
PREFERRED_FONT_FILES = (
    "dejavusans.ttf", "notosans-regular.ttf", "notosans-regular.otf", "arial unicode.ttf", "arialuni.ttf",
    "liberationsans-regular.ttf", "arial.ttf", "segoeui.ttf", "verdana.ttf", "tahoma.ttf",
    "notosanscjk-regular.ttc", "notosanscjksc-regular.otf", "notosanscjkjp-regular.otf", "notosanssc-regular.otf",
    "notosanssc-regular.ttf", "notosansjp-regular.otf", "msyh.ttc", "msyh.ttf", "yugothr.ttc", "msgothic.ttc",
    "malgun.ttf", "pingfang.ttc", "hiragino sans gb.ttc", "applegothic.ttf", "wqy-microhei.ttc", "wqy-zenhei.ttc",
    "droidsansfallbackfull.ttf", "droidsansfallback.ttf", "notosansarabic-regular.ttf", "notosanshebrew-regular.ttf",
    "notosansdevanagari-regular.ttf", "notosansthai-regular.ttf", "nirmala.ttf", "seguisym.ttf",
    "notosanssymbols2-regular.ttf",
)
MAX_FONTCONFIG_FALLBACKS = 40  # fontconfig's sorted list is every font installed; past this they add nothing useful
_STYLE_WORDS = ("bold", "italic", "oblique", "light", "thin", "black", "heavy", "condensed", "mono", "math")
_COVERAGE_SIZE = 24  # pixels: big enough that no real glyph renders like .notdef
_NOT_A_CHARACTER = "\uffff"  # a Unicode noncharacter: no font maps it, so it renders as .notdef
_reported_missing: set[str] = set()


def check_font(font, name: str = OPTION_NAME) -> str | None:
    """The checked font path (None for "" or None: automatic); ValueError naming `name` and the value when it is not
    a font file that Pillow's FreeType loads."""
    if font is None or font == "":
        return None
    if not isinstance(font, (str, os.PathLike)):
        raise ValueError(f"{name} must be the path of a .ttf, .otf or .ttc font file (or empty for an automatic "
                         f"system font), got {font!r}.")
    path = os.fspath(font)
    if not os.path.isfile(path):
        raise ValueError(f"{name} {path!r} is not a file; give the path of a .ttf, .otf or .ttc font file, or leave "
                         f"it empty for an automatic system font.")
    from PIL import ImageFont, features

    if not features.check("freetype2"):
        raise ValueError(f"{name} {path!r} cannot be used: this Pillow was built without FreeType; install a Pillow "
                         f"wheel from PyPI, or leave {name} empty.")
    try:
        ImageFont.truetype(path, 12)
    except OSError as error:
        raise ValueError(f"{name} {path!r} is not a font Pillow's FreeType can load ({error}); give a .ttf, .otf or "
                         f".ttc font file, or leave it empty for an automatic system font.") from None
    return path


def font_folders() -> list[str]:
    """Where fonts are installed on Linux, macOS and Windows (user folders too)."""
    home = os.path.expanduser("~")
    folders = [os.path.join(home, ".fonts"), os.path.join(home, ".local", "share", "fonts"),
               "/usr/share/fonts", "/usr/local/share/fonts",
               os.path.join(home, "Library", "Fonts"), "/Library/Fonts", "/System/Library/Fonts",
               "/System/Library/Fonts/Supplemental"]
    if sys.platform == "win32" or os.environ.get("WINDIR"):
        folders.append(os.path.join(os.environ.get("WINDIR", r"C:\Windows"), "Fonts"))
        if os.environ.get("LOCALAPPDATA"):
            folders.append(os.path.join(os.environ["LOCALAPPDATA"], "Microsoft", "Windows", "Fonts"))
    return folders


def _installed_fonts(folders: Sequence[str]) -> dict[str, str]:
    """Lower-case file name -> path of every font file under `folders` (the first found wins)."""
    found: dict[str, str] = {}
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        for root, _, files in os.walk(folder):
            for name in files:
                if name.lower().endswith(FONT_SUFFIXES):
                    found.setdefault(name.lower(), os.path.join(root, name))
    return found


def _fontconfig_fallbacks() -> list[str]:
    """fontconfig's own sans-serif fallback order (`fc-match -s`), when fontconfig is installed."""
    fc_match = shutil.which("fc-match")
    if fc_match is None:
        return []
    try:
        listed = subprocess.run([fc_match, "-s", "-f", "%{file}\n", "sans-serif"], capture_output=True, text=True,
                                timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    paths = [line.strip() for line in listed.splitlines() if line.strip().lower().endswith(FONT_SUFFIXES)]
    # a label's fallback should look like the rest of the legend: upright, regular weight
    regular = [path for path in paths if not any(style in os.path.basename(path).lower() for style in _STYLE_WORDS)]
    return regular[:MAX_FONTCONFIG_FALLBACKS]


@functools.lru_cache(maxsize=1)
def system_font_paths() -> tuple[str, ...]:
    """The system fonts a label may be drawn in, best first: the preferred ones found in `font_folders`, then
    fontconfig's fallbacks. Searched once per process; a font is loaded only when a label needs it (one FreeType
    cannot load has no glyphs, so it is never chosen)."""
    installed = _installed_fonts(font_folders())
    candidates = [installed[name] for name in PREFERRED_FONT_FILES if name in installed] + _fontconfig_fallbacks()
    return tuple(dict.fromkeys(path for path in candidates if os.path.isfile(path)))


@functools.lru_cache(maxsize=None)
def _coverage_font(path: str | None):
    from PIL import ImageFont

    if path is None:
        return ImageFont.load_default(size=_COVERAGE_SIZE)
    try:
        return ImageFont.truetype(path, _COVERAGE_SIZE)
    except OSError:
        return None


def _rendering(font, char: str) -> tuple:
    mask = font.getmask(char)
    return mask.size, bytes(mask)


@functools.lru_cache(maxsize=None)
def _notdef(path: str | None) -> tuple:
    return _rendering(_coverage_font(path), _NOT_A_CHARACTER)


@functools.lru_cache(maxsize=65536)
def has_glyph(path: str | None, char: str) -> bool:
    """Whether the font at `path` (None: Pillow's default) has its own glyph for `char` (not its .notdef box)."""
    font = _coverage_font(path)
    return font is not None and _rendering(font, char) != _notdef(path)


def drawn_characters(text: str) -> frozenset[str]:
    """The characters of `text` that need a glyph: not spaces, line breaks or invisible format characters."""
    return frozenset(char for char in text if unicodedata.category(char)[0] not in "ZC")


def missing_glyphs(path: str | None, text: str) -> frozenset[str]:
    """The characters of `text` the font at `path` (None: Pillow's default) has no glyph for."""
    return frozenset(char for char in drawn_characters(text) if not has_glyph(path, char))


def label_face(text: str, font: str | None = None, *, report: bool = True) -> str | None:
    """The font file to draw `text` in (None: Pillow's default). With `font`: it, unless it lacks a glyph of `text`;
    without: Pillow's default when it has them all (ASCII labels look as they always did), else the first system font
    that has them all, else the one with the most. `font` must be checked already (`check_font`); `report` logs the
    characters no font has (once per character)."""
    face, missing = _choose_face(text, font or None, system_font_paths())
    if missing and report:
        _report_missing(text, missing)
    return face


def grid_faces(texts: Sequence[str], font: str | None = None) -> list[str | None]:
    """Each label's font (`label_face`), one font for the whole grid where one has every label's glyphs: a grid of
    "cat" and "кошка" is drawn all in DejaVu Sans, not half in Pillow's font; a label the grid's font cannot draw
    gets its own."""
    shared, _ = _choose_face("".join(texts), font or None, system_font_paths())
    return [shared if not missing_glyphs(shared, text) else label_face(text, font) for text in texts]


@functools.lru_cache(maxsize=4096)
def _choose_face(text: str, chosen: str | None, system: tuple[str, ...]) -> tuple[str | None, frozenset[str]]:
    """(face, characters it lacks) for `text`: see `label_face`."""
    first = chosen  # None: Pillow's default
    best, best_missing = first, missing_glyphs(first, text)
    if not best_missing:
        return best, best_missing
    for path in system:
        missing = missing_glyphs(path, text)
        if not missing:
            return path, missing
        if len(missing) < len(best_missing):
            best, best_missing = path, missing
    return best, best_missing


def _report_missing(text: str, missing: frozenset[str]) -> None:
    new = missing - _reported_missing
    if new:
        _reported_missing.update(new)
        shown = " ".join(f"{char} (U+{ord(char):04X})" for char in sorted(new))
        logger.warning("Grid label %r: no font found has glyphs for %s; they are drawn as boxes. Install a font that "
                       "has them (Noto Sans / Noto Sans CJK) or set the `font` option / --grid-font to one.",
                       text[:60], shown)


@functools.lru_cache(maxsize=256)
def face_at_size(face: str | None, size: int):
    """The font `face` (None: Pillow's bundled scalable font, which needs no file and works offline) at `size` px."""
    from PIL import ImageFont

    size = max(1, int(size))
    return ImageFont.load_default(size=size) if face is None else ImageFont.truetype(face, size)


def clear_font_caches() -> None:
    """Forget the font search and glyph coverage (after fonts are installed while the process runs)."""
    for cached in _CACHES:
        cached.cache_clear()
    _reported_missing.clear()


_CACHES = (system_font_paths, _coverage_font, _notdef, has_glyph, _choose_face, face_at_size)
