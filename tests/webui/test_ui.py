"""The Gradio UI: widgets built from the same limits as the API, infotext paste, masks, LoRA tags, file serving."""

from __future__ import annotations

import io

import httpx
import pytest
from PIL import Image

from pipelines.params import GenerationLimits, Txt2ImgParams
from webui.ui.generate_tab import editor_mask, outpaint_sides_from
from webui.ui.progress_view import progress_html
from webui.ui.lora_tab import add_tag
from webui.ui.paste_infotext import infotext_to_form_values
from webui.ui.widgets import GenerationWidgets, values_to_params, widget_ranges

SEED_EXTRAS_OFF = [-1, 0, 0, 0]  # the form's Variation seed, Variation strength, Resize seed from width/height

LIMITS = GenerationLimits(max_side=1024, max_steps=77, max_batch_size=3, max_batch_count=5, max_cfg_scale=20.0)


def test_widget_ranges_are_the_generation_limits():
    ranges = widget_ranges(LIMITS)
    assert ranges["steps"].maximum == 77 and ranges["width"].maximum == 1024 and ranges["height"].maximum == 1024
    assert ranges["batch_size"].maximum == 3 and ranges["batch_count"].maximum == 5 and ranges["cfg_scale"].maximum == 20.0
    assert ranges["width"].step == 8 and ranges["seed"].minimum == -1


def test_an_empty_seed_is_random():
    # A1111's processing.get_fixed_seed maps None/'' to -1 (random); the HTTP API reads a null seed the same way.
    values = ["a cat", "", "Euler a", "Automatic", 20, 7, 512, 512, None, 1, 1, 1]
    assert values_to_params(values).seed == -1


def test_values_to_params_turns_whole_floats_into_ints():
    values = ["a cat", None, "Euler a", "Karras", 20.0, 7, 512.0, 768.0, -1.0, 2.0, 1.0, 2.0, None, 0.25, 640.0, 0.0]
    params = values_to_params(values)
    assert params == Txt2ImgParams(prompt="a cat", negative_prompt="", sampler="Euler a", schedule_type="Karras", steps=20,
                                   cfg_scale=7.0, width=512, height=768, seed=-1, batch_count=2, batch_size=1, clip_skip=2,
                                   subseed=-1, subseed_strength=0.25, seed_resize_from_w=640, seed_resize_from_h=0)
    assert isinstance(params.seed_resize_from_w, int) and isinstance(params.subseed_strength, float)
    assert isinstance(params.steps, int) and len(values) == len(GenerationWidgets.FIELDS)


def test_infotext_paste_fills_every_field_and_skips_values_over_the_limits():
    from pipelines.infotext import build_infotext

    text = build_infotext("a (red:1.1) cube", "blurry", {"Steps": 30, "Sampler": "DPM++ 2M", "Schedule type": "Karras",
                                                          "CFG scale": 6.5, "Seed": 123, "Size": "512x768", "Clip skip": 2,
                                                          "Denoising strength": 0.4, "RNG": "CPU"})
    values, notes = infotext_to_form_values(text, GenerationLimits(), ["DPM++ 2M", "Euler"], ["Automatic", "Karras"])
    assert values == {"prompt": "a (red:1.1) cube", "negative_prompt": "blurry", "steps": 30, "cfg_scale": 6.5,
                      "seed": 123, "width": 512, "height": 768, "clip_skip": 2, "sampler": "DPM++ 2M",
                      "schedule_type": "Karras", "denoising_strength": 0.4,
                      # no variation or seed resize written: the paste turns them off
                      "subseed_strength": 0.0, "seed_resize_from_w": 0, "seed_resize_from_h": 0}
    assert notes == []
    values, notes = infotext_to_form_values(text, LIMITS, ["Euler"], ["Automatic"])
    assert "steps" in values and "sampler" not in values and "width" in values
    assert any("DPM++ 2M" in n for n in notes)
    values, notes = infotext_to_form_values(text.replace("Steps: 30", "Steps: 500"), LIMITS, ["Euler"], ["Automatic"])
    assert "steps" not in values and any("Steps: '500' is outside [1, 77]" in n for n in notes)
    values, notes = infotext_to_form_values(text.replace("Clip skip: 2", "Clip skip: 2, NGMS: 1.5"), GenerationLimits(),
                                            ["DPM++ 2M"], ["Karras"])
    assert notes == ["NGMS: 1.5 is a setting here (Settings > Optimizations), not a form field; set it there to "
                     "reproduce this image."]


def test_a_paste_names_what_the_form_cannot_reproduce():
    from pipelines.infotext import build_infotext

    text = build_infotext("a cube", "", {"Steps": 20, "Sampler": "Euler", "CFG scale": 7, "Seed": 1, "Size": "100x96",
                                         "Model": "other-model", "VAE": "kl-f8", "Denoising strength": 1.5,
                                         "Hires upscale": 2, "Hires upscaler": "Latent", "Variation seed": 5})
    values, notes = infotext_to_form_values(text, GenerationLimits(), ["Euler"], ["Automatic"],
                                            current_model="mixkit-tiny-sd")
    assert "width" not in values and values["height"] == 96 and "denoising_strength" not in values
    assert values["subseed"] == 5 and "Variation seed" not in "\n".join(notes)  # pasted, as A1111's paste fields
    joined = "\n".join(notes)
    for fragment in ("Size-1: 100 is not a multiple of 8", "Denoising strength: '1.5' is outside [0, 1]",
                     "made with 'other-model', the loaded checkpoint is 'mixkit-tiny-sd'", "VAE: the image was decoded "
                     "with 'kl-f8'", "Hires fix (Hires upscale: 2, Hires upscaler: Latent)",
                     "RNG: the image's noise was drawn on the GPU"):
        assert fragment in joined, fragment


def test_a_paste_of_a_beta_schedule_notes_only_settings_other_than_a1111s_defaults():
    from pipelines.infotext import build_infotext

    schedules = ["Automatic", "Beta", "Align Your Steps"]
    fields = {"Steps": 20, "Sampler": "Euler", "Schedule type": "Beta", "CFG scale": 7, "Seed": 1, "Size": "64x64",
              "Beta schedule alpha": 0.6, "Beta schedule beta": 0.6, "RNG": "CPU"}
    values, notes = infotext_to_form_values(build_infotext("a cube", "", fields), GenerationLimits(), ["Euler"], schedules)
    assert values["schedule_type"] == "Beta" and notes == []
    fields.update({"Beta schedule alpha": 0.5, "Schedule rho": 5})
    _, notes = infotext_to_form_values(build_infotext("a cube", "", fields), GenerationLimits(), ["Euler"], schedules)
    # Beta alpha and Schedule rho are Settings here (Settings > Sampler parameters), as in A1111
    assert len(notes) == 1
    assert notes[0].startswith("Schedule rho: 5, Beta schedule alpha: 0.5: these are Settings here (Settings > "
                               "Sampler parameters)")
    fields.update({"Beta schedule alpha": 0.6, "Schedule rho": 0, "Pad conds": True})
    _, notes = infotext_to_form_values(build_infotext("a cube", "", fields), GenerationLimits(), ["Euler"], schedules)
    assert len(notes) == 1 and notes[0].startswith("Pad conds: True: these are Settings here")


def test_editor_mask_is_the_union_of_strokes_above_half_alpha():
    # A1111's create_binary_mask (modules/processing.py) thresholds the canvas alpha at x > 128, as the API's
    # mask reading does: a brush stroke's faint antialiased rim is not repainted.
    first = Image.new("RGBA", (16, 16), (0, 0, 0, 0))
    first.paste((255, 255, 255, 255), (0, 0, 4, 4))
    second = Image.new("RGBA", (16, 16), (0, 0, 0, 0))
    second.paste((255, 0, 0, 129), (8, 8, 16, 12))
    second.paste((255, 0, 0, 128), (8, 12, 16, 14))
    second.paste((255, 0, 0, 60), (8, 14, 16, 16))
    mask = editor_mask([first, second])
    assert mask.mode == "L" and mask.getpixel((1, 1)) == 255 and mask.getpixel((12, 9)) == 255
    assert mask.getpixel((12, 12)) == 0 and mask.getpixel((12, 15)) == 0 and mask.getpixel((6, 6)) == 0
    assert editor_mask([Image.new("RGBA", (16, 16))]) is None and editor_mask(None) is None
    faint_only = Image.new("RGBA", (16, 16), (0, 0, 0, 0))
    faint_only.paste((255, 255, 255, 60), (0, 0, 16, 16))
    assert editor_mask([faint_only]) is None  # nothing above 128: no mask, so inpaint asks for one


def test_outpaint_directions_round_each_extended_axis_up_to_8_as_the_api_does():
    assert outpaint_sides_from(Image.new("RGB", (64, 32)), 64, ["left", "down"]) == \
        {"left": 64, "right": 0, "top": 0, "bottom": 64}
    # 30 + 2 * 16 = 62 -> 64: the 34 pixels shared between left and right; 20 + 16 = 36 -> 40, all at the bottom
    assert outpaint_sides_from(Image.new("RGB", (32 - 2, 20)), 16, ["left", "right", "down"]) == \
        {"left": 17, "right": 17, "top": 0, "bottom": 20}
    for bad in ([], ["sideways"], None):
        with pytest.raises(ValueError, match="directions"):
            outpaint_sides_from(Image.new("RGB", (32, 32)), 8, bad)


def test_lora_tag_insert_and_progress_html():
    assert add_tag("a cat", "<lora:style:1>") == "a cat <lora:style:1>"
    assert add_tag("a cat <lora:style:1>", "<lora:style:1>") == "a cat <lora:style:1>"
    assert add_tag("", "<lora:x:1>") == "<lora:x:1>"
    html_text = progress_html(1.7, "<script>x</script>")
    assert "width:100.0%" in html_text and "<script>" not in html_text


def test_png_info_upload_refuses_bombs_and_non_images(tmp_path):
    from webui.ui.png_info_tab import read_upload_infotext

    (tmp_path / "text.png").write_text("not an image")
    with pytest.raises(ValueError, match="not an image"):
        read_upload_infotext(str(tmp_path / "text.png"), 10_000)
    Image.new("RGB", (200, 200)).save(tmp_path / "big.png")
    with pytest.raises(ValueError, match="200x200, above the 10,000-pixel limit"):
        read_upload_infotext(str(tmp_path / "big.png"), 10_000)
    from pipelines.png import save_png

    save_png(Image.new("RGB", (8, 8)), tmp_path / "ok.png", "hello\nSteps: 1")
    assert read_upload_infotext(str(tmp_path / "ok.png"), 10_000) == "hello\nSteps: 1"


@pytest.fixture(scope="module")
def ui_server(tiny_sd1_dir, tmp_path_factory, serving):
    """The full app (API + Gradio UI) on a tiny model."""
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("ui")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), limits=LIMITS)) as running:
        yield running


def test_ui_sliders_carry_the_server_limits(ui_server):
    config = httpx.get(ui_server.url + "/config", timeout=30).json()
    by_id = {c["props"].get("elem_id"): c["props"] for c in config["components"] if c["props"].get("elem_id")}
    assert by_id["txt2img_steps"]["maximum"] == 77 and by_id["img2img_steps"]["maximum"] == 77
    assert by_id["txt2img_width"]["maximum"] == 1024 and by_id["txt2img_batch_size"]["maximum"] == 3
    assert by_id["txt2img_prompt"]["max_length"] == LIMITS.max_prompt_chars
    assert by_id["txt2img_hires_steps"]["maximum"] == 77 and by_id["txt2img_hr_resize_x"]["maximum"] == 1024
    assert "txt2img_enable_hr" in by_id and "img2img_enable_hr" not in by_id
    tabs = [c["props"].get("label") for c in config["components"] if c["type"] == "tabitem"]
    assert tabs == ["txt2img", "img2img", "Extras", "PNG Info", "AppFlow", "LoRA", "Hypernetworks", "Textual Inversion",
                    "Checkpoint Merger", "Train", "Settings"]


@pytest.mark.parametrize("path", ["/gradio_api/file=/etc/passwd", "/gradio_api/file=../../../../etc/passwd",
                                  "/gradio_api/file=%2Fetc%2Fpasswd", "/file=/etc/passwd", "/gradio_api/file=/proc/self/environ"])
def test_ui_file_route_serves_no_arbitrary_file(ui_server, path):
    response = httpx.get(ui_server.url + path, timeout=30)
    assert response.status_code in (403, 404), (path, response.status_code)
    assert "root:" not in response.text and "PATH=" not in response.text


def test_ui_upload_over_the_limit_is_refused(ui_server):
    limit = ui_server.state.config.request_limits.max_body_bytes
    response = httpx.post(ui_server.url + "/gradio_api/upload", files={"files": ("x.png", io.BytesIO(b"\0" * (limit + 1)))},
                          timeout=60)
    assert response.status_code == 413


def test_img2img_tab_outpaint_mode_extends_the_canvas_and_keeps_the_original(ui_server):
    from pipelines.img2img import Img2ImgParams

    source = Image.new("RGB", (30, 30), (12, 34, 56))  # 30 + 16 = 46: rounded up to 48, as the API does
    params = Img2ImgParams(prompt="sky", steps=1, seed=3, sampler="Euler", init_images=[source], inpainting_fill="fill",
                           mask_blur=0, denoising_strength=0.8)
    sides = outpaint_sides_from(source, 16, ["right", "down"])
    outcome = ui_server.state.submit_outpaint(params, sides, save=False).future.result(120)
    image = outcome.result.images[0]
    assert image.size == (48, 48)
    assert image.crop((0, 0, 30, 30)).tobytes() == source.tobytes()
    with pytest.raises(ValueError, match="multiple of 8"):
        ui_server.state.submit_outpaint(params, {"left": 3, "right": 0, "top": 0, "bottom": 0}, save=False)


def test_controlnet_unit_widgets_become_a_checked_unit_spec(tmp_path):
    from types import SimpleNamespace

    from webui.controlnet_models import ControlNetModels
    from webui.ui.controlnet_units import with_controlnet

    (tmp_path / "canny_model").mkdir()
    (tmp_path / "canny_model" / "config.json").write_text("{}")
    state = SimpleNamespace(controlnets=ControlNetModels(tmp_path))
    image = Image.new("RGB", (8, 8))
    params = Txt2ImgParams(prompt="x")
    defaults = ["Crop and Resize", "Balanced", False, 512.0, -1.0, -1.0, None, None]  # the extension's, as they start
    assert with_controlnet(state, "txt2img", params, [False, image, "canny", "canny_model", 1.0, 0.0, 1.0,
                                                      *defaults]) is params
    controlled = with_controlnet(state, "txt2img", params, [True, image, "canny", "canny_model [1234]", 0.5, 0.1, 0.9,
                                                            *defaults])
    (spec,) = controlled.controlnets
    assert controlled.prompt == "x"
    assert (spec.model_name, spec.preprocessor, spec.weight, spec.guidance_start, spec.guidance_end) == \
        ("canny_model", "canny", 0.5, 0.1, 0.9)
    # the API's defaults for the same unit: crop and resize, Balanced, detection at 512, the preprocessor's thresholds
    assert (spec.resize_mode, spec.guess_mode, spec.soft_injection, spec.processor_res, spec.threshold_a) == \
        ("crop and resize", False, False, 512, None)
    chosen = with_controlnet(state, "txt2img", params, [True, image, "canny", "canny_model", 1, 0, 1, "Resize and Fill",
                                                        "My prompt is more important", True, 768.0, 50.0, 150.0,
                                                        None, None])
    (spec,) = chosen.controlnets
    assert (spec.resize_mode, spec.soft_injection, spec.pixel_perfect, spec.processor_res, spec.threshold_a,
            spec.threshold_b) == ("resize and fill", True, True, 768, 50.0, 150.0)
    unit_mask = Image.new("L", (8, 8), 255)  # the mask upload beside the control image
    (spec,) = with_controlnet(state, "txt2img", params, [True, image, "inpaint_only", "canny_model", 1, 0, 1,
                                                         *defaults[:-2], unit_mask, None]).controlnets
    assert spec.preprocessor == "inpaint_only" and spec.mask is unit_mask and spec.effective_region_mask is None
    region = Image.new("L", (4, 4), 255)  # the effective region upload, last
    (spec,) = with_controlnet(state, "txt2img", params, [True, image, "canny", "canny_model", 1, 0, 1,
                                                         *defaults[:-1], region]).controlnets
    assert spec.effective_region_mask is region
    for values, fragment in (([True, None, "canny", "canny_model", 1, 0, 1, *defaults], "control image"),
                             ([True, image, "canny", "../canny_model", 1, 0, 1, *defaults], "Unknown ControlNet model"),
                             ([True, image, "nope", "canny_model", 1, 0, 1, *defaults], "nope"),
                             # any finite weight >= 0 runs, as the extension's API takes it (the slider stops at 2)
                             ([True, image, "canny", "canny_model", -1, 0, 1, *defaults], "weight"),
                             ([True, image, "canny", "canny_model", 1, 0, 1, "Stretch", "Balanced", False, 512.0, -1.0,
                               -1.0, None, None], "resize_mode 'Stretch'"),
                             ([True, image, "canny", "canny_model", 1, 0, 1, "Crop and Resize", "Balanced", False, 20.0,
                               -1.0, -1.0, None, None], "processor_res must be an integer in \\[64, 2048\\]"),
                             ([True, image, "inpaint", "canny_model", 1, 0, 1, *defaults[:-2], Image.new("L", (4, 8)), None],
                              "ControlNet Unit 0: .*mask is 4x8 but the unit's image is 8x8")):
        with pytest.raises(ValueError, match=fragment):
            with_controlnet(state, "txt2img", params, values)


def test_a_paste_says_what_is_wrong_with_a_value_and_names_schedules_it_cannot_set():
    text = "cat\nSteps: 20.0, Sampler: Euler, Schedule type: Beta, CFG scale: 7, Seed: 5.0, Size: 512x512, RNG: CPU"
    values, notes = infotext_to_form_values(text, GenerationLimits(), ["Euler"], ["Automatic", "Karras"])
    assert "steps" not in values and "seed" not in values and "schedule_type" not in values
    assert notes == ["Steps: '20.0' is not an integer; kept the current value.",
                     "Seed: '5.0' is not an integer; kept the current value.",
                     "Schedule type 'Beta' is not available here; kept the current schedule type."]
    values, notes = infotext_to_form_values(text.replace("Beta", "Turbo"), GenerationLimits(), ["Euler"], ["Automatic"])
    assert "schedule_type" not in values and "Schedule type 'Turbo' is not an A1111 schedule type" in notes[-1]


def test_a_pasted_dpm_adaptive_or_ddim_cfgpp_pastes_and_an_unknown_sampler_says_so():
    text = "cat\nSteps: 20, Sampler: DPM adaptive, CFG scale: 7, Seed: 5, Size: 512x512, RNG: CPU"
    names = ["Euler", "DPM adaptive", "DDIM CFG++"]
    for sampler in ("DPM adaptive", "DDIM CFG++"):
        values, notes = infotext_to_form_values(text.replace("DPM adaptive", sampler), GenerationLimits(), names,
                                                ["Automatic"])
        assert values["sampler"] == sampler and notes == []
    values, notes = infotext_to_form_values(text.replace("DPM adaptive", "Heun PP2"), GenerationLimits(), names,
                                            ["Automatic"])
    assert "sampler" not in values and notes == ["Sampler 'Heun PP2' is not available here; kept the current sampler."]


def test_a_prompt_without_parameters_gets_no_rng_note():
    values, notes = infotext_to_form_values("just a prompt", GenerationLimits(), ["Euler"], ["Automatic"])
    assert values["prompt"] == "just a prompt" and notes == []
    _, notes = infotext_to_form_values("cat\nSteps: 20, Sampler: Euler, Seed: 5", GenerationLimits(), ["Euler"], ["Automatic"])
    assert len(notes) == 1 and notes[0].startswith("RNG: the image's noise was drawn on the GPU")


def test_ui_gallery_images_carry_their_infotext_when_saving_is_off(ui_server):
    from gradio_client import Client

    state = ui_server.state
    state.options.apply({"samples_save": False, "return_grid": False})
    try:
        client = Client(ui_server.url + "/", verbose=False)
        styles, hires_off = [], [False, "Latent", 2, 0, 0, 0, 0.7, "", "", "Use same sampler", "Use same scheduler"]
        result = client.predict("a cube", "", "Euler", "Automatic", 1, 7, 64, 64, 1000, 1, 2, 1, *SEED_EXTRAS_OFF, styles, *hires_off, api_name="/run")
    finally:
        state.options.apply({"samples_save": True, "return_grid": True})
    gallery = result[2]
    assert [item["image"].rsplit("/", 1)[1] for item in gallery] == ["00001-1000.png", "00002-1001.png"]
    for item, seed in zip(gallery, (1000, 1001)):
        with Image.open(item["image"]) as image:
            assert image.format == "PNG" and f"Seed: {seed}," in image.info["parameters"]
    # A1111 saves the batch's grid even with image saving off (grid_save is its own option, on by default)
    assert [path.name for path in state.output_dir.glob("*.png")] == ["grid-0000.png"]


def test_a_batch_gets_a1111s_grid_first_in_the_gallery_and_saved(ui_server):
    # A1111 process_images: a result of 2+ images gets images.image_grid(...) first in the gallery (return_grid)
    # and saved as grid-0000.png (grid_save); both options default True. Its infotext is the first image's.
    from gradio_client import Client

    from webui.ui.result_grid import image_grid

    state = ui_server.state
    before = {p.name for p in state.output_dir.glob("*.png")}
    client = Client(ui_server.url + "/", verbose=False)
    styles, hires_off = [], [False, "Latent", 2, 0, 0, 0, 0.7, "", "", "Use same sampler", "Use same scheduler"]
    result = client.predict("a cube", "", "Euler", "Automatic", 1, 7, 64, 64, 2000, 3, 1, 1, *SEED_EXTRAS_OFF, styles, *hires_off, api_name="/run")
    files = [item["image"] for item in result[2]]
    new = sorted({p.name for p in state.output_dir.glob("*.png")} - before)
    grids = [name for name in new if name.startswith("grid-")]
    assert len(files) == 4 and len(grids) == 1 and len(new) == 4
    images = []
    for path in files[1:]:
        with Image.open(path) as image:
            images.append(image.convert("RGB"))
            images[-1].info["parameters"] = image.info["parameters"]
    with Image.open(state.output_dir / grids[0]) as grid:
        assert grid.size == (128, 128) and grid.convert("RGB").tobytes() == image_grid(images).tobytes()
        assert grid.info["parameters"] == images[0].info["parameters"] and "Seed: 2000," in grid.info["parameters"]
    assert result[3] == images[0].info["parameters"]  # the grid's infotext shown first is the first image's
