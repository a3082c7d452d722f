"""The Extras tab's result: saved when saving is on, with the source's chunks plus `postprocessing`, as the API.

A1111's run_postprocessing (modules/postprocessing.py) keeps the source's PNG info, adds `postprocessing`,
saves the result (`images.save_image(..., short_filename=True, no_prompt=True)`) and shows the text.
"""

from __future__ import annotations

from pathlib import Path
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


SCALE_BY, SCALE_TO = 0, 1  # the API's resize_mode values, which the Resize radio gives by index


def upscale(blocks, image, mode=SCALE_BY, size=(512, 512), crop=True, factor=2.0):
    """(result file, sizes, postprocessing text): the last outputs of the Upscale button's handler."""
    *_, (progress, path, _, size, info, task_box) = handler(blocks, "extras_generate", "click").fn(
        image, "Lanczos", factor, mode, *size, crop, 0.0, 0.0, 0.0, "", SimpleNamespace(session_hash=None))
    assert "Done: 1 image(s)" in progress and task_box.startswith("ended task(")
    return path, size, info


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


def test_the_resize_choice_is_the_apis_resize_mode(built):
    # A1111's Extras "Scale by" / "Scale to" are resize_mode 0 / 1 of its API; the radio hands the handler the index.
    from .ui_blocks import component

    _, blocks = built
    radio = component(blocks, "extras_resize_mode")
    assert radio.preprocess("Scale to") == SCALE_TO and radio.preprocess("Scale by") == SCALE_BY
    assert radio.value == "Scale by"


def test_scale_to_with_crop_to_fit_is_the_apis_scale_to(built, tmp_path):
    # A1111 scripts/postprocessing_upscale.py: "Scale to" upscales by max(W / width, H / height), so the image
    # covers W x H, and "Crop to fit" cuts it to W x H around the centre; the text names size and crop.
    from pipelines.upscale import upscale_image

    _, blocks = built
    source = source_image(tmp_path)  # 24x16: covering 64x64 needs x4 (96x64), then 16 columns off each side
    path, size, info = upscale(blocks, source, SCALE_TO, (64, 64), True)
    assert info == "Postprocess upscale to: 64x64, Postprocess crop to: 64x64, Postprocess upscaler: Lanczos"
    assert size == "24x16 -> 64x64"
    whole = upscale_image(source, 4.0, upscaler="Lanczos")
    with Image.open(path) as result:
        assert result.size == (64, 64) and result.info["parameters"] == SOURCE_INFOTEXT
        assert result.convert("RGB").tobytes() == whole.crop((16, 0, 80, 64)).tobytes()
    path, size, info = upscale(blocks, source, SCALE_TO, (64, 64), False)
    assert size == "24x16 -> 96x64" and info == "Postprocess upscale to: 64x64, Postprocess upscaler: Lanczos"


def test_scale_to_beyond_the_upscale_limit_is_refused_as_the_api_refuses_it(built, tmp_path):
    import gradio as gr

    _, blocks = built
    with pytest.raises(gr.Error, match="needs an upscale by 16, over the limit of 8.0"):
        upscale(blocks, source_image(tmp_path), SCALE_TO, (384, 64), True)


def batch_files(tmp_path, sizes) -> list[str]:
    from pipelines.png import save_png

    return [str(save_png(Image.new("RGB", size, (10 * n, 100, 30)), tmp_path / f"0000{n}-{n}.png",
                         f"{SOURCE_INFOTEXT}, Batch: {n}")) for n, size in enumerate(sizes)]


def upscale_batch(blocks, paths, factor=2.0):
    """(gallery, sizes, postprocessing text): the last outputs of the "Upscale all" button's handler."""
    *_, (progress, _, gallery, sizes, info, _) = handler(blocks, "extras_batch_generate", "click").fn(
        paths, "Nearest", factor, SCALE_BY, 512, 512, True, 0.0, 0.0, 0.0, "", SimpleNamespace(session_hash=None))
    assert f"Done: {len(paths)} image(s)" in progress
    return gallery, sizes, info


def test_batch_process_upscales_every_file_keeping_each_ones_chunks(built, tmp_path):
    # A1111 modules/ui_postprocessing.py "Batch Process" tab: every uploaded file goes through run_extras, each
    # result keeps its own source's PNG info and gets `postprocessing`; the text shown is the last image's.
    _, blocks = built
    paths = batch_files(tmp_path, [(24, 16), (8, 40)])
    gallery, sizes, info = upscale_batch(blocks, paths)
    assert sizes == "24x16 -> 48x32; 8x40 -> 16x80"
    assert info == "Postprocess upscale by: 2.0, Postprocess upscaler: Nearest"
    for n, ((path, _), source) in enumerate(zip(gallery, paths)):
        with Image.open(path) as result, Image.open(source) as original:
            assert result.info["parameters"] == f"{SOURCE_INFOTEXT}, Batch: {n}" and result.info["postprocessing"] == info
            assert result.tobytes() == original.resize(result.size, Image.Resampling.NEAREST).tobytes()


def test_a_batch_with_one_file_over_the_limit_queues_nothing(built, tmp_path):
    import gradio as gr

    state, blocks = built
    paths = batch_files(tmp_path, [(24, 16), (1200, 1200)])
    before = sorted(state.output_dir.glob("*.png"))
    with pytest.raises(gr.Error, match="00001-1.png: .*4800x4800"):
        upscale_batch(blocks, paths, factor=4.0)
    assert sorted(state.output_dir.glob("*.png")) == before


def test_batch_files_are_read_as_the_api_reads_them(built, tmp_path):
    """QA: the batch path ignored EXIF orientation and dropped alpha; A1111's `images.read` (and the API's
    `load_image`) turn the picture upright and put transparency on white."""
    _, blocks = built
    rotated = Image.new("RGB", (20, 10), (200, 30, 30))
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to view"
    rotated.save(tmp_path / "rotated.jpg", exif=exif, quality=95)
    clear = Image.new("RGBA", (8, 8), (255, 0, 0, 0))
    clear.save(tmp_path / "clear.png")
    gallery, sizes, _ = upscale_batch(blocks, [str(tmp_path / "rotated.jpg"), str(tmp_path / "clear.png")])
    assert sizes == "10x20 -> 16x40; 8x8 -> 16x16"  # upright; sides floored to multiples of 8, as A1111
    with Image.open(gallery[1][0]) as result:
        assert result.convert("RGB").getpixel((3, 3)) == (255, 255, 255)


def test_model_upscaler_files_are_choices_of_extras_and_hires_and_upscale(tmp_path):
    from mixkit.testing.tiny_upscalers import TINY_RRDB, save_upscaler, tiny_upscaler
    from pipelines.upscale import UPSCALERS, upscale_image
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    from .ui_blocks import component

    (tmp_path / "models").mkdir(), (tmp_path / "ESRGAN").mkdir()
    save_upscaler(tiny_upscaler(TINY_RRDB, seed=8), tmp_path / "ESRGAN" / "4x_foolhardy_Remacri.pth", "esrgan")
    state = ServerState(ServerConfig(models_dir=str(tmp_path / "models"), output_dir=str(tmp_path / "out"),
                                     esrgan_models_path=str(tmp_path / "ESRGAN")))
    try:
        blocks = build_ui(state)
        for elem_id in ("extras_upscaler", "txt2img_hr_upscaler"):
            assert "4x_foolhardy_Remacri" in [choice[0] for choice in component(blocks, elem_id).choices]
        source = source_image(tmp_path)
        *_, (_, path, _, size, info, _) = handler(blocks, "extras_generate", "click").fn(
            source, "4x_foolhardy_Remacri", 2.0, SCALE_BY, 512, 512, True, 0.0, 0.0, 0.0, "",
            SimpleNamespace(session_hash=None))
        assert size == "24x16 -> 48x32" and info.endswith("Postprocess upscaler: 4x_foolhardy_Remacri")
        with Image.open(path) as result:
            expected = upscale_image(source, 2.0, upscaler="4x_foolhardy_Remacri")
            assert result.convert("RGB").tobytes() == expected.tobytes()
    finally:
        state.close()
    assert "4x_foolhardy_Remacri" not in UPSCALERS


def test_extras_follow_enable_pnginfo_and_save_txt_as_a1111s_save_image(built, tmp_path):
    # A1111's run_postprocessing saves through save_image: enable_pnginfo off writes no chunk at all, save_txt writes
    # the postprocessing text beside the file.
    state, blocks = built
    state.options.apply({"samples_save": True, "enable_pnginfo": False, "save_txt": True})
    try:
        path, _, info = upscale(blocks, source_image(tmp_path))
        state.options.apply({"samples_save": False})
        unsaved, _, _ = upscale(blocks, source_image(tmp_path))
    finally:
        state.options.apply({"samples_save": True, "enable_pnginfo": True, "save_txt": False})
    with Image.open(path) as result:
        assert not {"parameters", "postprocessing"} & set(result.info)
    assert open(path[:-4] + ".txt", encoding="utf-8").read() == info + "\n"
    with Image.open(unsaved) as result:  # the file only shown: no chunk either, and no text file
        assert "parameters" not in result.info and "postprocessing" not in result.info
    assert [p.suffix for p in Path(unsaved).parent.iterdir()] == [".png"]
