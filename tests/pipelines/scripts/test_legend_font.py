"""The legend font of X/Y/Z plot and Prompt matrix (pipelines/scripts/legend_font.py): the context's `font`, checked
before the first generation, draws the labels; the cells are untouched."""

import os

import pytest

from pipelines import grid_fonts
from pipelines.grid_annotations import GridAnnotation, draw_grid_annotations
from pipelines.image_grid import image_grid
from pipelines.params import Txt2ImgParams
from pipelines.scripts import prompt_matrix, xyz_plot
from pipelines.scripts.legend_font import legend_font
from pipelines.scripts.prompt_matrix import PromptMatrixConfig

DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
TINY = dict(prompt="a cat", width=64, height=64, steps=1, seed=5, sampler="Euler")
needs_dejavu = pytest.mark.skipif(not os.path.isfile(DEJAVU), reason="DejaVu Sans is not installed here")


@pytest.fixture(autouse=True)
def no_system_fonts(monkeypatch):
    """Without a `font`, labels fall back to Pillow's font: the tests see only what `font` changes."""
    grid_fonts.clear_font_caches()
    monkeypatch.setattr(grid_fonts, "system_font_paths", lambda: ())
    yield
    grid_fonts.clear_font_caches()


def test_the_context_font_is_checked_and_empty_means_automatic(tmp_path):
    assert legend_font({}) is None and legend_font({"font": ""}) is None and legend_font({"font": None}) is None
    with pytest.raises(ValueError, match=f"font '{tmp_path / 'gone.ttf'}' is not a file"):
        legend_font({"font": str(tmp_path / "gone.ttf")})


def test_a_bad_font_fails_the_plot_and_the_matrix_before_any_generation(sd1_pipe, tmp_path):
    calls = []
    bad = str(tmp_path / "gone.ttf")
    with pytest.raises(ValueError, match="is not a file"):
        xyz_plot.run(sd1_pipe, Txt2ImgParams(**TINY), xyz_plot.xyz_config(("Seed", "1,2")),
                     callback=calls.append, font=bad)
    with pytest.raises(ValueError, match="is not a file"):
        prompt_matrix.run(sd1_pipe, Txt2ImgParams(**{**TINY, "prompt": "a cat|red"}), PromptMatrixConfig(),
                          callback=calls.append, font=bad)
    assert calls == []
    # a server's plan refuses it too, before the job is queued
    with pytest.raises(ValueError, match="is not a file"):
        xyz_plot.planned_params(Txt2ImgParams(**TINY), xyz_plot.xyz_config(("Seed", "1,2")), font=bad)
    with pytest.raises(ValueError, match="is not a file"):
        prompt_matrix.planned_params(Txt2ImgParams(**{**TINY, "prompt": "a cat|red"}), PromptMatrixConfig(), font=bad)


@needs_dejavu
def test_the_plot_draws_its_labels_in_the_font(sd1_pipe):
    config = xyz_plot.xyz_config(("Prompt S/R", "cat,кошка"), include_lone_images=True)
    params = Txt2ImgParams(**TINY)
    plain = xyz_plot.run(sd1_pipe, params, config)
    drawn = xyz_plot.run(sd1_pipe, params, config, font=DEJAVU)
    cells = drawn.images[1:]
    assert [cell.tobytes() for cell in cells] == [cell.tobytes() for cell in plain.images[1:]]
    labels = [[GridAnnotation(label)] for label in config.x.labels()]
    expected = draw_grid_annotations(image_grid(cells, rows=1), 64, 64, labels, [[GridAnnotation()]], 0, DEJAVU)
    assert drawn.images[0].tobytes() == expected.tobytes()
    assert drawn.images[0].tobytes() != plain.images[0].tobytes()  # Pillow's font drew "кошка" as boxes


@needs_dejavu
def test_the_matrix_draws_its_labels_in_the_font(sd1_pipe):
    params = Txt2ImgParams(**{**TINY, "prompt": "a cat|красный"})
    plain = prompt_matrix.run(sd1_pipe, params, PromptMatrixConfig())
    drawn = prompt_matrix.run(sd1_pipe, params, PromptMatrixConfig(), font=DEJAVU)
    hor, ver = prompt_matrix.matrix_annotations(["a cat", "красный"])
    expected = draw_grid_annotations(image_grid(drawn.images[1:], rows=1), 64, 64, hor, ver, 0, DEJAVU)
    assert drawn.images[0].tobytes() == expected.tobytes() != plain.images[0].tobytes()
