"""A1111's "Send to img2img / inpaint / extras" under the galleries and the ↙️ paste button next to the prompt.

A1111 (modules/ui.py, modules/infotext_utils.py): `register_paste_params_button(ParamBinding(paste_button=...,
tabname=..., source_text_component=generation_info, source_image_component=gallery))` sends the selected image
and its parameters; `ParamBinding(paste_button=toprow.paste, tabname=..., source_text_component=toprow.prompt)`
parses the prompt box, or pastes the last generation's parameters when the box is empty.
"""

from __future__ import annotations

import gradio as gr
import pytest
from PIL import Image

from .ui_blocks import handler, model_less_ui

TEXTS = ["a castle\nNegative prompt: blurry\nSteps: 33, Sampler: Euler, CFG scale: 6.5, Seed: 1000, Size: 64x64, "
         "RNG: CPU",
         "a castle\nNegative prompt: blurry\nSteps: 33, Sampler: Euler, CFG scale: 6.5, Seed: 1001, Size: 64x64, "
         "RNG: CPU"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with model_less_ui(tmp_path_factory.mktemp("ui-send-to")) as built_ui:
        yield built_ui


@pytest.fixture()
def gallery(tmp_path):
    """A result as the gallery hands it to a handler: [(file, caption)], with the images' PNG files."""
    from pipelines.png import save_png

    images = [Image.new("RGB", (64, 64), (200, 10, 30)), Image.new("RGB", (64, 64), (10, 200, 30))]
    paths = [save_png(image, tmp_path / f"0000{n}-{1000 + n}.png", text)
             for n, (image, text) in enumerate(zip(images, TEXTS))]
    return [(str(path), None) for path in paths], images


def outputs_by_id(fn, values) -> dict:
    """elem_id (or component type) -> the value the click sets; skipped outputs are left out."""
    sent = {}
    for block, update in zip(fn.outputs, values):
        if isinstance(update, dict) and update.get("__type__") == "update" and "value" not in update:
            continue  # gr.skip(): the field keeps its value
        value = update.get("value", update) if isinstance(update, dict) else update
        sent[block.elem_id or type(block).__name__] = value
    return sent


@pytest.mark.parametrize("source", ["txt2img", "img2img"])
def test_send_to_inpaint_carries_the_selected_image_and_its_parameters(built, gallery, source):
    _, blocks = built
    items, images = gallery
    fn = handler(blocks, f"{source}_send_to_inpaint", "click")
    sent = outputs_by_id(fn, fn.fn(items, TEXTS, 1))
    assert sent["img2img_image"].convert("RGB").tobytes() == images[1].tobytes()
    assert sent["img2img_mode"] == "inpaint" and sent["img2img_seed"] == 1001 and sent["img2img_prompt"] == "a castle"
    assert sent["img2img_negative_prompt"] == "blurry" and sent["img2img_steps"] == 33
    assert sent["Tabs"].selected == "img2img"
    sent = outputs_by_id(fn, handler(blocks, f"{source}_send_to_img2img", "click").fn(items, TEXTS, None))
    assert sent["img2img_mode"] == "img2img" and sent["img2img_seed"] == 1000  # nothing selected: the first image
    assert sent["img2img_image"].convert("RGB").tobytes() == images[0].tobytes()


def test_send_to_extras_carries_the_image(built, gallery):
    _, blocks = built
    items, images = gallery
    fn = handler(blocks, "txt2img_send_to_extras", "click")
    sent = outputs_by_id(fn, fn.fn(items, TEXTS, 1))
    assert sent["extras_image"].convert("RGB").tobytes() == images[1].tobytes() and sent["Tabs"].selected == "extras"


def test_send_without_a_result_is_refused(built):
    _, blocks = built
    with pytest.raises(gr.Error, match="There is no result to send yet; press Generate first."):
        handler(blocks, "txt2img_send_to_img2img", "click").fn(None, [], None)


def test_the_paste_button_parses_the_prompt_box_as_an_infotext(built):
    _, blocks = built
    fn = handler(blocks, "txt2img_paste", "click")
    civitai = "a red cube\nNegative prompt: blurry\nSteps: 12, Sampler: Euler, CFG scale: 5, Seed: 77, Size: 64x96, RNG: CPU"
    sent = outputs_by_id(fn, fn.fn(civitai, []))
    assert sent["txt2img_prompt"] == "a red cube" and sent["txt2img_negative_prompt"] == "blurry"
    assert (sent["txt2img_steps"], sent["txt2img_seed"], sent["txt2img_width"], sent["txt2img_height"]) == (12, 77, 64, 96)
    assert sent["txt2img_enable_hr"] is False and sent["txt2img_paste_notes"] == ""


def test_the_paste_button_with_an_empty_box_takes_the_last_generation(built):
    _, blocks = built
    fn = handler(blocks, "img2img_paste", "click")
    sent = outputs_by_id(fn, fn.fn("", TEXTS))
    assert sent["img2img_prompt"] == "a castle" and sent["img2img_seed"] == 1000
    with pytest.raises(gr.Error, match="The prompt box is empty and this tab has no generation yet"):
        fn.fn("  ", [])


HIRES_TEXT = ("a castle\nNegative prompt: blurry\nSteps: 20, Sampler: Euler, CFG scale: 6.5, Seed: 5, Size: 64x64, "
              "Model: elsewhere, Clip skip: 2, RNG: CPU, Denoising strength: 0.6, Hires upscale: 2, "
              "Hires upscaler: Latent")
# the Extra seed options travel with the seed (turned off when the image had none), unlike A1111's
SENT_IDS = {"img2img_prompt", "img2img_negative_prompt", "img2img_steps", "img2img_seed", "img2img_width",
            "img2img_height", "img2img_image", "img2img_mode", "Tabs", "img2img_paste_notes",
            "img2img_subseed_strength", "img2img_seed_resize_from_w", "img2img_seed_resize_from_h"}


def send(blocks, tmp_path, size, text, target="img2img"):
    from pipelines.png import save_png

    path = save_png(Image.new("RGB", size, "red"), tmp_path / "sent.png", text)
    fn = handler(blocks, f"txt2img_send_to_{target}", "click")
    return outputs_by_id(fn, fn.fn([(str(path), None)], [text], 0))


@pytest.mark.parametrize("target", ["img2img", "inpaint"])
def test_send_sets_the_images_own_size_and_only_a1111s_send_fields(built, tmp_path, target):
    # A1111 1.10 modules/infotext_utils.py: `send_image_and_dimensions` sets width/height from the sent image
    # (opts.send_size), and the Send buttons copy only paste_field_names = ['Prompt', 'Negative prompt', 'Steps',
    # 'Face restoration'] + ['Seed'] (opts.send_seed): not the infotext's first-pass Size, nor the hires pass's
    # Denoising strength, sampler, CFG scale or clip skip.
    _, blocks = built
    sent = send(blocks, tmp_path, (128, 192), HIRES_TEXT, target)  # a 2x hires result of a 64x96 first pass
    assert set(sent) == SENT_IDS
    assert (sent["img2img_width"], sent["img2img_height"]) == (128, 192)
    assert (sent["img2img_prompt"], sent["img2img_negative_prompt"], sent["img2img_steps"], sent["img2img_seed"]) == (
        "a castle", "blurry", 20, 5)
    assert sent["img2img_image"].size == (128, 192) and sent["img2img_mode"] == target
    assert sent["img2img_paste_notes"] == ""  # no hires, model or clip-skip note: nothing else travels
    # the image had no variation: the target's Extra seed options are turned off, its variation seed kept
    assert (sent["img2img_subseed_strength"], sent["img2img_seed_resize_from_w"],
            sent["img2img_seed_resize_from_h"]) == (0.0, 0, 0)


VARIATION_TEXT = ("a castle\nSteps: 20, Sampler: Euler, CFG scale: 6.5, Seed: 5, Size: 64x64, Variation seed: 81, "
                  "Variation seed strength: 0.3, Seed resize from: 48x80, RNG: CPU")


@pytest.mark.parametrize("source", ["txt2img", "img2img"])
@pytest.mark.parametrize("target", ["img2img", "inpaint"])
def test_send_carries_the_variation_seed_its_strength_and_seed_resize(built, tmp_path, source, target):
    from pipelines.png import save_png

    _, blocks = built
    path = save_png(Image.new("RGB", (64, 64), "red"), tmp_path / "sent.png", VARIATION_TEXT)
    fn = handler(blocks, f"{source}_send_to_{target}", "click")
    sent = outputs_by_id(fn, fn.fn([(str(path), None)], [VARIATION_TEXT], 0))
    assert (sent["img2img_seed"], sent["img2img_subseed"], sent["img2img_subseed_strength"]) == (5, 81, 0.3)
    assert (sent["img2img_seed_resize_from_w"], sent["img2img_seed_resize_from_h"]) == (48, 80)
    assert sent["img2img_paste_notes"] == ""


def test_send_names_extra_seed_values_the_form_cannot_take(built, tmp_path):
    _, blocks = built
    text = VARIATION_TEXT.replace("0.3", "1.5").replace("48x80", "50x80")
    sent = send(blocks, tmp_path, (64, 64), text)
    assert "img2img_subseed_strength" not in sent and "img2img_seed_resize_from_w" not in sent
    assert sent["img2img_subseed"] == 81 and sent["img2img_seed_resize_from_h"] == 80
    assert sent["img2img_paste_notes"] == ("- Variation seed strength: '1.5' is outside [0, 1]; kept the current value.\n"
                                           "- Seed resize from-1: 50 is not a multiple of 8; kept the current value.")


def test_send_rounds_the_size_to_the_sliders_step_and_says_so(built, tmp_path):
    # The size sliders step by 8; a browser range input snaps to the nearest step, the larger one on a tie.
    _, blocks = built
    sent = send(blocks, tmp_path, (100, 75), HIRES_TEXT)
    assert (sent["img2img_width"], sent["img2img_height"]) == (104, 72)
    assert sent["img2img_paste_notes"] == ("- Size: the image is 100x75; the form takes multiples of 8, so it is set "
                                           "to 104x72 and the image is resized to that.")


def test_send_of_an_image_too_large_for_the_form_keeps_the_forms_size(built, tmp_path):
    state, blocks = built
    side = state.limits.max_side + 8
    sent = send(blocks, tmp_path, (side, 64), "")
    assert "img2img_width" not in sent and "img2img_height" not in sent and "img2img_prompt" not in sent
    assert sent["img2img_paste_notes"] == (f"- Size: the image is {side}x64; width {side} is outside [64, "
                                           f"{state.limits.max_side}], so the form keeps its size and the image is "
                                           "resized to it.")


def test_the_paste_button_still_fills_everything_the_infotext_has(built):
    _, blocks = built
    fn = handler(blocks, "img2img_paste", "click")
    sent = outputs_by_id(fn, fn.fn(HIRES_TEXT, []))
    assert (sent["img2img_width"], sent["img2img_height"], sent["img2img_denoising_strength"]) == (64, 64, 0.6)
    assert sent["img2img_cfg_scale"] == 6.5 and sent["img2img_clip_skip"] == 2
    assert "Hires fix (Hires upscale: 2, Hires upscaler: Latent)" in sent["img2img_paste_notes"]


def test_send_to_extras_keeps_the_png_bit_exact_with_its_infotext(built, gallery):
    # A1111 sends the gallery's PNG to Extras, and run_postprocessing keeps the source's PNG info; the Extras image
    # must therefore be written as PNG (Gradio's default WebP is lossy and has no `parameters` chunk).
    from .ui_blocks import component

    _, blocks = built
    items, images = gallery
    fn = handler(blocks, "txt2img_send_to_extras", "click")
    sent = outputs_by_id(fn, fn.fn(items, TEXTS, 1))["extras_image"]
    extras_image = component(blocks, "extras_image")
    shown = extras_image.postprocess(sent)  # what the browser receives, and sends back on "Upscale"
    with Image.open(shown.path) as received:
        assert received.format == "PNG" and received.info["parameters"] == TEXTS[1]
        assert received.convert("RGB").tobytes() == images[1].tobytes()
    back = extras_image.preprocess(shown)
    assert back.info["parameters"] == TEXTS[1] and back.tobytes() == images[1].tobytes()


INPAINT_TEXT = ("a red circle\nSteps: 4, Sampler: Euler a, Schedule type: Uniform, CFG scale: 7, Seed: 5, Size: 96x64, "
                "RNG: CPU, Denoising strength: 0.6, Mask blur: 9, Mask mode: Inpaint not masked, Masked content: latent "
                "noise, Inpaint area: Only masked, Masked area padding: 12")


def test_the_img2img_paste_fills_a1111s_inpaint_paste_fields(built):
    # A1111 modules/ui.py `img2img_paste_fields`: (mask_blur, "Mask blur"), (inpainting_mask_invert, "Mask mode"),
    # (inpainting_fill, "Masked content"), (inpaint_full_res, "Inpaint area"), (inpaint_full_res_padding,
    # "Masked area padding").
    _, blocks = built
    fn = handler(blocks, "img2img_paste", "click")
    sent = outputs_by_id(fn, fn.fn(INPAINT_TEXT, []))
    assert (sent["img2img_mask_blur"], sent["img2img_mask_mode"], sent["img2img_inpainting_fill"],
            sent["img2img_only_masked"], sent["img2img_inpaint_full_res_padding"]) == (
        9, "Inpaint not masked", "latent noise", True, 12)
    assert sent["img2img_denoising_strength"] == 0.6 and sent["img2img_paste_notes"] == ""


def test_an_infotext_without_inpaint_keys_resets_them_to_a1111s_defaults_and_keeps_mask_blur(built):
    # A1111's parse_generation_parameters fills a missing Mask mode / Masked content / Inpaint area / padding with
    # "Inpaint masked", "original", "Whole picture" and 32 before pasting; it adds no Mask blur, so that field stays.
    _, blocks = built
    fn = handler(blocks, "img2img_paste", "click")
    sent = outputs_by_id(fn, fn.fn(TEXTS[0], []))
    assert "img2img_mask_blur" not in sent
    assert (sent["img2img_mask_mode"], sent["img2img_inpainting_fill"], sent["img2img_only_masked"],
            sent["img2img_inpaint_full_res_padding"]) == ("Inpaint masked", "original", False, 32)


def test_an_inpaint_value_the_form_cannot_take_is_named_and_kept(built):
    _, blocks = built
    fn = handler(blocks, "img2img_paste", "click")
    text = INPAINT_TEXT.replace("latent noise", "smudge").replace("Mask blur: 9", "Mask blur: 99")
    sent = outputs_by_id(fn, fn.fn(text, []))
    assert "img2img_inpainting_fill" not in sent and "img2img_mask_blur" not in sent
    assert sent["img2img_paste_notes"] == (
        "- Masked content: 'smudge' is not one of fill, original, latent noise, latent nothing; kept the current value.\n"
        "- Mask blur: '99' is not an integer in [0, 64]; kept the current value.")


def test_the_txt2img_paste_has_no_inpaint_fields(built):
    _, blocks = built
    fn = handler(blocks, "txt2img_paste", "click")
    sent = outputs_by_id(fn, fn.fn(INPAINT_TEXT, []))
    assert not any("mask" in elem_id or "inpaint" in elem_id for elem_id in sent)


def test_the_img2img_hires_note_sends_the_user_to_txt2img(built):
    # img2img has no Hires. fix controls (neither has A1111's): the note must not point to them.
    _, blocks = built
    fn = handler(blocks, "img2img_paste", "click")
    notes = outputs_by_id(fn, fn.fn(HIRES_TEXT, []))["img2img_paste_notes"]
    assert ("- Hires fix (Hires upscale: 2, Hires upscaler: Latent): hires fix is a txt2img feature and this tab has "
            "no Hires. fix controls, so the paste fills the first pass only; send the image to txt2img to reproduce "
            "it.") in notes.split("\n")
