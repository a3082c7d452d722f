"""PNG Info's "Send to" buttons and the gallery's "Reuse" seed, driven through the built Blocks' own handlers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from PIL import Image

from .ui_blocks import handler

HIRES_TEXT = ("a castle\nNegative prompt: blurry\nSteps: 33, Sampler: Euler, Schedule type: Karras, CFG scale: 6.5, "
              "Seed: 123, Size: 512x768, Denoising strength: 0.45, Hires upscale: 1.5, Hires steps: 10, "
              "Hires upscaler: Latent, RNG: CPU")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The full UI over a server state without a loaded model (sending and reusing need none)."""
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-png-info")
    (root / "models").mkdir()
    state = ServerState(ServerConfig(models_dir=str(root / "models"), output_dir=str(root / "out")))
    blocks = build_ui(state)
    yield state, blocks
    state.close()


def send(blocks, kind: str, text: str, path: str | None) -> dict:
    """elem_id (or component type) -> the value the "Send to <kind>" click sets; skipped outputs are left out."""
    fn = handler(blocks, f"pnginfo_send_to_{kind}", "click")
    outputs = fn.fn(text, path)
    sent = {}
    for block, update in zip(fn.outputs, outputs):
        value = update.get("value", update) if isinstance(update, dict) else update
        if isinstance(update, dict) and update.get("__type__") == "update" and "value" not in update:
            continue  # gr.skip(): the field keeps its value
        sent[block.elem_id or type(block).__name__] = value
    return sent


def test_send_to_txt2img_ticks_and_fills_hires_fix(built):
    _, blocks = built
    sent = send(blocks, "txt2img", HIRES_TEXT, None)
    assert sent["txt2img_prompt"] == "a castle" and sent["txt2img_steps"] == 33 and sent["txt2img_width"] == 512
    assert sent["txt2img_enable_hr"] is True and sent["txt2img_hr_scale"] == 1.5
    assert sent["txt2img_hires_steps"] == 10 and sent["txt2img_hr_upscaler"] == "Latent"
    assert sent["txt2img_hr_resize_x"] == 0 and sent["txt2img_hr_resize_y"] == 0
    assert sent["txt2img_hr_denoising"] == 0.45
    assert sent["pnginfo_notes"] == ""  # everything was set: nothing to note


def test_send_to_txt2img_notes_only_what_it_cannot_set(built):
    _, blocks = built
    text = HIRES_TEXT.replace("Hires upscale: 1.5", "Hires resize: 1024x1536").replace("Latent", "4x-UltraSharp")
    sent = send(blocks, "txt2img", text, None)
    assert sent["txt2img_enable_hr"] is True and sent["txt2img_hr_resize_x"] == 1024 and sent["txt2img_hr_resize_y"] == 1536
    assert "txt2img_hr_upscaler" not in sent and "txt2img_hr_scale" not in sent
    assert sent["pnginfo_notes"].startswith("- Hires upscaler '4x-UltraSharp' is not available here")
    assert sent["pnginfo_notes"].count("\n") == 0


def test_send_to_txt2img_of_an_image_without_hires_unticks_hires_fix(built):
    # A1111's enable_hr paste field is False when the infotext has no hires recipe (modules/ui.py).
    _, blocks = built
    assert send(blocks, "txt2img", HIRES_TEXT, None)["txt2img_enable_hr"] is True
    plain = "a cat\nSteps: 7, Sampler: Euler a, CFG scale: 7, Seed: 4242, Size: 64x64, RNG: CPU"
    sent = send(blocks, "txt2img", plain, None)
    assert sent["txt2img_enable_hr"] is False and sent["txt2img_seed"] == 4242


def test_send_to_img2img_sends_the_image_too(built, tmp_path):
    from pipelines.png import save_png

    _, blocks = built
    picture = Image.new("RGB", (24, 16), (200, 10, 30))
    path = save_png(picture, tmp_path / "picture.png", HIRES_TEXT)
    sent = send(blocks, "img2img", HIRES_TEXT, str(path))
    image = sent["img2img_image"]
    assert image.size == (24, 16) and image.convert("RGB").tobytes() == picture.tobytes()
    assert sent["img2img_prompt"] == "a castle" and sent["img2img_denoising_strength"] == 0.45
    assert "Hires fix (Hires upscale: 1.5" in sent["pnginfo_notes"]  # img2img has no hires controls
    assert "txt2img_enable_hr" not in sent


@pytest.mark.parametrize("kind, prefix", [("txt2img", "txt2img"), ("img2img", "img2img"), ("inpaint", "img2img")])
def test_send_carries_the_extra_seed_options(built, tmp_path, kind, prefix):
    # A1111's paste fields (modules/processing_scripts/seed.py): Variation seed, Variation seed strength,
    # Seed resize from-1/-2
    from pipelines.png import save_png

    _, blocks = built
    text = ("a cube\nSteps: 20, Sampler: Euler, CFG scale: 7, Seed: 9, Size: 64x64, Variation seed: 81, "
            "Variation seed strength: 0.3, Seed resize from: 48x80, RNG: CPU")
    path = save_png(Image.new("RGB", (64, 64), "red"), tmp_path / "variation.png", text)
    sent = send(blocks, kind, text, str(path))
    assert (sent[f"{prefix}_seed"], sent[f"{prefix}_subseed"], sent[f"{prefix}_subseed_strength"]) == (9, 81, 0.3)
    assert (sent[f"{prefix}_seed_resize_from_w"], sent[f"{prefix}_seed_resize_from_h"]) == (48, 80)
    plain = send(blocks, kind, "a cube\nSteps: 20, Sampler: Euler, Seed: 9, Size: 64x64, RNG: CPU", str(path))
    assert (plain[f"{prefix}_subseed_strength"], plain[f"{prefix}_seed_resize_from_w"]) == (0.0, 0)


def test_reuse_takes_the_selected_gallery_images_seed(built):
    _, blocks = built
    select = handler(blocks, "txt2img_gallery", "select")
    reuse = handler(blocks, "txt2img_reuse_seed", "click")
    seeds, texts = [1000, 1001, 1002, 1003], [f"cube\nSeed: {s}" for s in [1000, 1001, 1002, 1003]]
    assert reuse.fn(seeds, None) == 1000 and reuse.fn([], None) == -1
    infotext, selected = select.fn(texts, SimpleNamespace(index=3))
    assert infotext == "cube\nSeed: 1003" and reuse.fn(seeds, selected) == 1003
    generate = handler(blocks, "txt2img_generate", "click")
    assert generate.outputs[6] is select.outputs[-1]  # a new result clears the selection (then the task box)


def test_gallery_images_are_pngs_with_their_infotext(tmp_path):
    from webui.ui.gallery_files import gallery_pngs

    images = [Image.new("RGB", (8, 8), (i * 40, 0, 0)) for i in range(2)]
    paths = gallery_pngs(images, [1000, 1001], ["cube\nSeed: 1000", "cube\nSeed: 1001"], tmp_path)
    assert [p.rsplit("/", 1)[1] for p in paths] == ["00001-1000.png", "00002-1001.png"]
    with Image.open(paths[1]) as image:
        assert image.format == "PNG" and image.info["parameters"] == "cube\nSeed: 1001"


def test_a_send_without_parameters_is_refused_without_a_traceback(built):
    import gradio as gr

    _, blocks = built
    with pytest.raises(gr.Error, match="Drop an image with generation parameters first") as raised:
        handler(blocks, "pnginfo_send_to_txt2img", "click").fn("", None)
    assert raised.value.print_exception is False


def multi_chunk_png(tmp_path, parameters: str | None) -> str:
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    if parameters is not None:
        info.add_text("parameters", parameters)
    info.add_text("postprocessing", "Postprocess upscale by: 2.0, Postprocess upscaler: Lanczos")
    info.add_itxt("extras", "caf\u00e9 notes")
    path = tmp_path / "multi.png"
    Image.new("RGB", (24, 16), (1, 2, 3)).save(path, pnginfo=info)
    return str(path)


def test_png_info_shows_every_text_chunk(built, tmp_path):
    # A1111 modules/extras.py `run_pnginfo`: every item `read_info_from_image` collects is listed, parameters first.
    _, blocks = built
    read = handler(blocks, "pnginfo_image", "change")
    text, items, note = read.fn(multi_chunk_png(tmp_path, HIRES_TEXT))
    assert text == HIRES_TEXT and note == ""
    assert items == ("postprocessing:\nPostprocess upscale by: 2.0, Postprocess upscaler: Lanczos\n\n"
                     "extras:\ncaf\u00e9 notes")
    text, items, note = read.fn(multi_chunk_png(tmp_path, None))
    assert text == "" and items.startswith("postprocessing:\n") and note == "This image has no generation parameters."


def test_png_info_has_a1111s_four_send_buttons(built, tmp_path):
    # A1111 modules/ui.py PNG Info: `create_buttons(["txt2img", "img2img", "inpaint", "extras"])`.
    from pipelines.png import save_png

    _, blocks = built
    picture = Image.new("RGB", (24, 16), (200, 10, 30))
    path = str(save_png(picture, tmp_path / "picture.png", HIRES_TEXT))
    sent = send(blocks, "inpaint", HIRES_TEXT, path)
    assert sent["img2img_mode"] == "inpaint" and sent["Tabs"].selected == "img2img"
    assert sent["img2img_image"].convert("RGB").tobytes() == picture.tobytes() and sent["img2img_seed"] == 123
    assert send(blocks, "img2img", HIRES_TEXT, path)["img2img_mode"] == "img2img"
    fn = handler(blocks, "pnginfo_send_to_extras", "click")
    image, tabs = fn.fn(path)
    assert tabs.selected == "extras" and fn.outputs[0].elem_id == "extras_image"
    assert image.info["parameters"] == HIRES_TEXT and image.convert("RGB").tobytes() == picture.tobytes()


def test_send_to_img2img_fills_the_inpaint_fields(built):
    # A1111's PNG Info "Send to img2img" pastes through `img2img_paste_fields`, inpaint keys included.
    _, blocks = built
    text = HIRES_TEXT + ", Mask blur: 9, Mask mode: Inpaint not masked, Masked content: fill, Inpaint area: Only " \
                        "masked, Masked area padding: 12"
    sent = send(blocks, "img2img", text, None)
    assert (sent["img2img_mask_blur"], sent["img2img_mask_mode"], sent["img2img_inpainting_fill"],
            sent["img2img_only_masked"], sent["img2img_inpaint_full_res_padding"]) == (
        9, "Inpaint not masked", "fill", True, 12)
