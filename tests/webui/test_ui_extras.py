"""The Extras tab's result: saved when saving is on, with the source's chunks plus `postprocessing`, as the API.

A1111's run_postprocessing (modules/postprocessing.py) keeps the source's PNG info, adds `postprocessing`,
saves the result (`images.save_image(..., short_filename=True, no_prompt=True)`) and shows the text.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from PIL import Image

from .ui_blocks import handler, model_less_ui

SOURCE_INFOTEXT = "a cube\nSteps: 4, Sampler: Euler, Seed: 123, Size: 24x16"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with model_less_ui(tmp_path_factory.mktemp("ui-extras")) as built_ui:
        yield built_ui


def source_image(tmp_path) -> Image.Image:
    """The source as Gradio hands it to the handler: a PIL image opened from the uploaded PNG."""
    from pipelines.png import save_png

    path = save_png(Image.new("RGB", (24, 16), (200, 10, 30)), tmp_path / "00000-123.png", SOURCE_INFOTEXT)
    with Image.open(path) as image:
        image.load()
        return image.convert("RGB")


def upscale(blocks, image):
    return handler(blocks, "extras_generate", "click").fn(image, "Lanczos", 2.0, SimpleNamespace(session_hash=None))


def test_extras_saves_its_result_with_the_apis_chunks(built, tmp_path):
    from pipelines.upscale import upscale_image

    state, blocks = built
    state.options.apply({"samples_save": True})
    source = source_image(tmp_path)
    path, size, info = upscale(blocks, source)
    assert info == "Postprocess upscale by: 2.0, Postprocess upscaler: Lanczos" and size == "24x16 -> 48x32"
    saved = sorted(state.output_dir.glob("*.png"))
    assert [p.name for p in saved] == ["00000.png"] and str(saved[0]) == path
    with Image.open(path) as result:
        assert result.info["parameters"] == SOURCE_INFOTEXT and result.info["postprocessing"] == info
        assert result.convert("RGB").tobytes() == upscale_image(source, 2.0, upscaler="Lanczos").tobytes()
    second, _, _ = upscale(blocks, source)
    assert second.endswith("00001.png")  # the counter continues, as for generated images


def test_extras_with_saving_off_writes_nothing_to_the_output_folder(built, tmp_path):
    state, blocks = built
    state.options.apply({"samples_save": False})
    try:
        before = sorted(state.output_dir.glob("*.png"))
        path, _, info = upscale(blocks, source_image(tmp_path))
    finally:
        state.options.apply({"samples_save": True})
    assert sorted(state.output_dir.glob("*.png")) == before and not path.startswith(str(state.output_dir))
    with Image.open(path) as result:  # a download of the result still carries the chunks
        assert result.info["postprocessing"] == info and result.info["parameters"] == SOURCE_INFOTEXT
