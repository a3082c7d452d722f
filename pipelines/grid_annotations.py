"""Labels around an image grid, as A1111's `draw_grid_annotations` (modules/images.py) draws them.

X/Y/Z plot and Prompt matrix label their grids this way: one list of annotations above each column and one left of
each row. Text is wrapped to the cell (columns) or to the left pad (rows, 3/4 of a cell wide), a line still too wide
is drawn in a smaller font, and an inactive annotation (Prompt matrix: a part left out of that cell) is grey with a
line through it. `margin` puts that many white pixels between cells. `font` is A1111's `font` setting (a .ttf /
.otf / .ttc path; None: automatic), and each label is drawn in a font that has its glyphs (`pipelines.grid_fonts`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.grid_fonts import check_font, face_at_size, grid_faces

ACTIVE_COLOR = (0, 0, 0)
INACTIVE_COLOR = (153, 153, 153)  # A1111's grey for an inactive label
STRIKE_WIDTH = 4
# A label is read at a glance: a 30,000-character Prompt S/R value (the prompt's own bound) wrapped in full made
# the top pad tens of thousands of pixels tall (gigabytes across 30 columns) and took seconds to measure. Longer
# labels end in "..." (A1111 draws them whole); the infotext keeps the full value.
MAX_LABEL_CHARS = 400
MAX_LABEL_LINES = 8
ELLIPSIS = "..."


@dataclass
class GridAnnotation:
    """One label line: its text, and whether it is active (drawn black) or not (grey, struck through)."""

    text: str = ""
    is_active: bool = True


@dataclass
class _Line:
    text: str
    is_active: bool
    size: tuple[int, int]
    allowed_width: int
    face: str | None  # the font file it is drawn in (None: Pillow's default)


def grid_font(size: int, face: str | None = None):
    """The font file `face` at `size` px; None: PIL's bundled scalable font (Pillow >= 10.1 ships it; no font file
    needed, so it works offline)."""
    return face_at_size(face, max(1, int(size)))


def _text_size(draw, text: str, font) -> tuple[int, int]:
    left, top, right, bottom = draw.multiline_textbbox((0, 0), text, font=font)
    return right - left, bottom - top


def shorten_label(text: str) -> str:
    """`text`, or its first MAX_LABEL_CHARS characters and "..." when longer."""
    return text if len(text) <= MAX_LABEL_CHARS else text[:MAX_LABEL_CHARS].rstrip() + ELLIPSIS


def wrap_text(draw, text: str, font, width: int, max_lines: int | None = None) -> list[str]:
    """`text` in lines no wider than `width` where words allow (a single long word keeps its own line); with
    `max_lines`, the lines past it are dropped and the last kept one ends in "..."."""
    lines = _wrapped(draw, text, font, width)
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[:max_lines - 1] + [lines[max_lines - 1].rstrip() + " " + ELLIPSIS]
    return lines


def _wrapped(draw, text: str, font, width: int) -> list[str]:
    lines: list[str] = []
    for paragraph in text.split("\n"):
        current = ""
        for word in paragraph.split(" "):
            candidate = word if not current else f"{current} {word}"
            if current and _text_size(draw, candidate, font)[0] > width:
                lines.append(current)
                current = word
            else:
                current = candidate
        lines.append(current)
    return lines


def _lay_out(draw, annotations: list[GridAnnotation], faces: dict[str, str | None], font_size: int,
            allowed_width: int) -> list[_Line]:
    lines = []
    for annotation in annotations:
        label = shorten_label(annotation.text)
        face = faces.get(label)
        font = grid_font(font_size, face)
        for text in wrap_text(draw, label, font, allowed_width, MAX_LABEL_LINES):
            lines.append(_Line(text, annotation.is_active, _text_size(draw, text, font), allowed_width, face))
    return lines


def _block_height(lines: list[_Line], spacing: int) -> int:
    return sum(line.size[1] + spacing for line in lines) - spacing if lines else 0


def _draw_lines(draw, center_x: float, top: float, lines: list[_Line], font_size: int, spacing: int) -> None:
    """Each line centred on `center_x`, shrinking the font (by 10% a time) until it fits its allowed width."""
    y = top
    for line in lines:
        size = font_size
        font = grid_font(size, line.face)
        while size > 1 and _text_size(draw, line.text, font)[0] > line.allowed_width:
            size = int(size * 0.9)
            font = grid_font(size, line.face)
        color = ACTIVE_COLOR if line.is_active else INACTIVE_COLOR
        draw.multiline_text((center_x, y + line.size[1] / 2), line.text, font=font, fill=color, anchor="mm",
                            align="center")
        if not line.is_active:
            middle = y + line.size[1] // 2
            draw.line((center_x - line.size[0] // 2, middle, center_x + line.size[0] // 2, middle),
                      fill=INACTIVE_COLOR, width=STRIKE_WIDTH)
        y += line.size[1] + spacing


def draw_grid_annotations(grid, cell_width: int, cell_height: int, hor_texts: list[list[GridAnnotation]],
                          ver_texts: list[list[GridAnnotation]], margin: int = 0, font: str | None = None):
    """A new image: `grid`'s cells (each `cell_width` x `cell_height`) with `hor_texts[col]` above each column and
    `ver_texts[row]` left of each row, `margin` pixels between cells. The font size is (cell width + height) / 25,
    as A1111's; with no text on a side, that side gets no pad. `font`: a font file path (A1111's `font` option),
    used for every label it has the glyphs of; None or "": Pillow's default font, or a system font where a label
    needs glyphs it lacks (`pipelines.grid_fonts.grid_faces`)."""
    from PIL import Image, ImageDraw

    font = check_font(font)
    if cell_width < 1 or cell_height < 1:
        raise ValueError(f"cell size must be positive, got {cell_width}x{cell_height}.")
    if margin < 0:
        raise ValueError(f"margin must be 0 or more pixels, got {margin}.")
    cols, rows = grid.width // cell_width, grid.height // cell_height
    if cols != len(hor_texts) or rows != len(ver_texts):
        raise ValueError(f"a {grid.width}x{grid.height} grid of {cell_width}x{cell_height} cells has {cols} columns "
                         f"and {rows} rows, but got labels for {len(hor_texts)} columns and {len(ver_texts)} rows.")
    font_size = (cell_width + cell_height) // 25
    spacing = font_size // 2
    labels = list(dict.fromkeys(shorten_label(annotation.text) for lines in (*hor_texts, *ver_texts)
                                for annotation in lines if annotation.text))
    faces = dict(zip(labels, grid_faces(labels, font)))
    has_row_text = any(annotation.text for lines in ver_texts for annotation in lines)
    pad_left = cell_width * 3 // 4 if has_row_text else 0

    measure = ImageDraw.Draw(Image.new("RGB", (1, 1), "white"))
    columns = [_lay_out(measure, annotations, faces, font_size, cell_width) for annotations in hor_texts]
    row_lines = [_lay_out(measure, annotations, faces, font_size, pad_left) for annotations in ver_texts]
    column_heights = [_block_height(lines, spacing) for lines in columns]
    row_heights = [_block_height(lines, spacing) for lines in row_lines]
    has_column_text = any(annotation.text for lines in hor_texts for annotation in lines)
    pad_top = max(column_heights) + spacing * 2 if has_column_text else 0

    result = Image.new("RGB", (grid.width + pad_left + margin * (cols - 1),
                               grid.height + pad_top + margin * (rows - 1)), "white")
    for row in range(rows):
        for col in range(cols):
            cell = grid.crop((cell_width * col, cell_height * row, cell_width * (col + 1), cell_height * (row + 1)))
            result.paste(cell, (pad_left + (cell_width + margin) * col, pad_top + (cell_height + margin) * row))
    draw = ImageDraw.Draw(result)
    for col, lines in enumerate(columns):
        center = pad_left + (cell_width + margin) * col + cell_width / 2
        _draw_lines(draw, center, pad_top / 2 - column_heights[col] / 2, lines, font_size, spacing)
    for row, lines in enumerate(row_lines):
        top = pad_top + (cell_height + margin) * row + cell_height / 2 - row_heights[row] / 2
        _draw_lines(draw, pad_left / 2, top, lines, font_size, spacing)
    return result
