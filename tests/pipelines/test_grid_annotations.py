"""Labels around a grid, as A1111's draw_grid_annotations (pipelines/grid_annotations.py)."""

import pytest
from PIL import Image

from pipelines.grid_annotations import GridAnnotation, draw_grid_annotations, grid_font, wrap_text


def _grid(cols=2, rows=2, size=100):
    return Image.new("RGB", (cols * size, rows * size), (40, 90, 160))


def test_no_text_and_no_margin_leaves_the_grid_as_is():
    grid = _grid()
    out = draw_grid_annotations(grid, 100, 100, [[GridAnnotation()]] * 2, [[GridAnnotation()]] * 2)
    assert out.size == grid.size and out.tobytes() == grid.tobytes()


def test_labels_add_a_top_pad_and_a_left_pad_of_three_quarters_of_a_cell():
    out = draw_grid_annotations(_grid(), 100, 100, [[GridAnnotation("Steps: 10")], [GridAnnotation("Steps: 20")]],
                                [[GridAnnotation("CFG: 5")], [GridAnnotation("CFG: 7")]])
    assert out.width == 200 + 75 and out.height > 200
    pad_top = out.height - 200
    assert out.getpixel((75, pad_top)) == (40, 90, 160)  # the first cell starts after both pads
    assert out.crop((75, 0, 275, pad_top)).getcolors(100000) != [(200 * pad_top, (255, 255, 255))]  # text drawn


def test_margin_separates_cells_with_white():
    out = draw_grid_annotations(_grid(), 100, 100, [[GridAnnotation()]] * 2, [[GridAnnotation()]] * 2, margin=6)
    assert out.size == (206, 206)
    assert out.getpixel((103, 50)) == (255, 255, 255) and out.getpixel((110, 50)) == (40, 90, 160)


def test_inactive_label_is_grey_and_struck_through():
    active = draw_grid_annotations(_grid(1, 1), 100, 100, [[GridAnnotation("cat")]], [[GridAnnotation()]])
    inactive = draw_grid_annotations(_grid(1, 1), 100, 100, [[GridAnnotation("cat", is_active=False)]],
                                     [[GridAnnotation()]])
    # anti-aliased text: the darkest label pixel is near black when active, the struck-through grey when not
    grey = inactive.crop((0, 0, 100, inactive.height - 100)).convert("L")
    assert grey.getextrema()[0] == 153 and (153, 153, 153) in {color for _, color in
                                                                inactive.crop((0, 0, 100, 10)).getcolors(100000)}
    assert active.crop((0, 0, 100, active.height - 100)).convert("L").getextrema()[0] < 60


def test_long_labels_wrap_to_the_cell_width():
    from PIL import ImageDraw

    draw = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    lines = wrap_text(draw, "a very long label that cannot fit in one line", grid_font(8), 60)
    assert len(lines) > 1 and " ".join(lines) == "a very long label that cannot fit in one line"
    one = draw_grid_annotations(_grid(1, 1), 100, 100, [[GridAnnotation("short")]], [[GridAnnotation()]])
    many = draw_grid_annotations(_grid(1, 1), 100, 100, [[GridAnnotation("a very long label " * 4)]],
                                 [[GridAnnotation()]])
    assert many.height > one.height and many.width == one.width


def test_very_long_labels_are_cut_to_a_few_lines_ending_in_an_ellipsis():
    from PIL import ImageDraw

    from pipelines.grid_annotations import MAX_LABEL_CHARS, MAX_LABEL_LINES, shorten_label

    draw = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    lines = wrap_text(draw, "word " * 200, grid_font(8), 60, max_lines=3)
    assert len(lines) == 3 and lines[2].endswith(" ...") and lines[:2] == wrap_text(draw, "word " * 200,
                                                                                      grid_font(8), 60)[:2]
    assert shorten_label("x" * 1000) == "x" * MAX_LABEL_CHARS + "..." and shorten_label("short") == "short"
    # a 30,000-character label: the pad is that of MAX_LABEL_LINES lines, not of thousands
    capped = draw_grid_annotations(_grid(1, 1), 100, 100, [[GridAnnotation("word " * 6000)]], [[GridAnnotation()]])
    full = draw_grid_annotations(_grid(1, 1), 100, 100, [[GridAnnotation("word " * 80)]], [[GridAnnotation()]])
    assert capped.height == full.height < 100 + 12 * MAX_LABEL_LINES


def test_label_count_must_match_the_grid():
    with pytest.raises(ValueError, match="2 columns and 2 rows, but got labels for 3 columns"):
        draw_grid_annotations(_grid(), 100, 100, [[GridAnnotation()]] * 3, [[GridAnnotation()]] * 2)
