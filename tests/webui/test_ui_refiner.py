"""The web UI's Refiner accordion: a paste fills it as A1111's refiner script registers its paste fields, and its
values become the pipeline's refiner exactly as an API request's refiner_checkpoint does."""

from __future__ import annotations

import pytest

from pipelines.params import GenerationLimits, Txt2ImgParams
from webui.checkpoints import CheckpointCatalog
from webui.ui.paste_infotext import infotext_to_form_values
from webui.ui.refiner_controls import with_refiner

SDXL_TEXT = ("a lighthouse\nNegative prompt: lowres\nSteps: 30, Sampler: DPM++ 2M, Schedule type: Karras, "
             "CFG scale: 7, Seed: 1234, Size: 1024x1024, Model hash: 31e35c80fc, Model: sd_xl_base_1.0, RNG: CPU, "
             "Version: v1.10.1")
REFINED = SDXL_TEXT.replace(", Version", ", Refiner: sd_xl_refiner_1.0 [7440042bbd], Refiner switch at: 0.65, Version")


@pytest.fixture
def catalog(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    for name in ("sd_xl_base_1.0.safetensors", "sd_xl_refiner_1.0.safetensors"):
        (models / name).write_bytes(b"weights")
    return CheckpointCatalog(models_dir=models)


def _paste(text, catalog):
    def checkpoint_of(name):
        try:
            return catalog.find(name).title
        except ValueError:
            return None

    return infotext_to_form_values(text, GenerationLimits(), ["DPM++ 2M"], ["Karras"],
                                   current_model="sd_xl_base_1.0 [31e35c80fc]", refiner_checkpoint_of=checkpoint_of)


def test_a_paste_fills_the_refiner_accordion(catalog):
    values, notes = _paste(REFINED, catalog)
    assert notes == []
    assert (values["enable_refiner"], values["refiner_checkpoint"], values["refiner_switch_at"]) == \
        (True, "sd_xl_refiner_1.0.safetensors", 0.65)


def test_a_paste_without_refiner_turns_the_accordion_off(catalog):
    values, notes = _paste(SDXL_TEXT, catalog)
    assert values["enable_refiner"] is False and "refiner_checkpoint" not in values and notes == []


def test_a_refiner_this_server_lacks_is_named(catalog):
    values, notes = _paste(REFINED.replace("sd_xl_refiner_1.0 [7440042bbd]", "my_refiner"), catalog)
    assert values["enable_refiner"] is False and values["refiner_switch_at"] == 0.65
    assert notes == ["Refiner: the image was refined with 'my_refiner', which is not among this server's checkpoints; "
                     "add it to the models folder (or pick another refiner) to reproduce the image."]


def test_the_accordion_makes_the_apis_refiner(catalog):
    params = Txt2ImgParams(prompt="a")
    assert with_refiner(params, [False, "sd_xl_refiner_1.0.safetensors", 0.6, "None"], catalog) is params
    # no checkpoint: no refiner, but the accordion's switch point is kept for a plot's Refiner checkpoint axis
    unrefined = with_refiner(params, [True, "None", 0.6, "None"], catalog)
    assert (unrefined.refiner, unrefined.refiner_switch_at) == (None, 0.6)
    refined = with_refiner(params, [True, "sd_xl_refiner_1.0.safetensors", 0.6, "None"], catalog)
    assert refined.refiner == str(catalog.models_dir / "sd_xl_refiner_1.0.safetensors")
    assert refined.refiner_switch_at == 0.6 and refined.refiner_config_dir is None
    with pytest.raises(ValueError, match=r"refiner_checkpoint='gone': Unknown checkpoint 'gone'; available: "):
        with_refiner(params, [True, "gone", 0.6, "None"], catalog)


def test_the_accordions_config_folder_is_a_diffusers_folder_of_the_servers(catalog):
    """Translated as the API's refiner_config_dir: a checkpoint title that is a diffusers folder becomes its path."""
    (catalog.models_dir / "xl-refiner-configs" / "unet").mkdir(parents=True)
    (catalog.models_dir / "xl-refiner-configs" / "unet" / "config.json").write_text("{}")
    catalog.refresh()
    params = Txt2ImgParams(prompt="a")
    refined = with_refiner(params, [True, "sd_xl_refiner_1.0.safetensors", 0.6, "xl-refiner-configs"], catalog)
    assert refined.refiner_config_dir == str(catalog.models_dir / "xl-refiner-configs")
    assert with_refiner(params, [False, "None", 0.6, "xl-refiner-configs"], catalog) is params  # the accordion off
    with pytest.raises(ValueError, match=r"refiner_config_dir='sd_xl_base_1.0.safetensors' is the checkpoint "
                                         r"'sd_xl_base_1.0.safetensors', not a diffusers folder: "
                                         r".*\(xl-refiner-configs\)"):
        with_refiner(params, [True, "sd_xl_refiner_1.0.safetensors", 0.6, "sd_xl_base_1.0.safetensors"], catalog)


def test_both_tabs_have_the_accordion_listing_the_servers_checkpoints(tmp_path):
    from webui.ui.generate_tab import form_params

    from .ui_blocks import component, handler, model_less_ui

    with model_less_ui(tmp_path) as (state, blocks):
        (tmp_path / "models" / "sd_xl_refiner_1.0.safetensors").write_bytes(b"weights")  # added after the start
        (tmp_path / "models" / "refiner-configs" / "unet").mkdir(parents=True)
        (tmp_path / "models" / "refiner-configs" / "unet" / "config.json").write_text("{}")
        state.catalog.refresh()
        for kind in ("txt2img", "img2img"):
            assert component(blocks, f"{kind}_enable_refiner").value is False
            assert component(blocks, f"{kind}_refiner_switch_at").value == 0.8
            refresh = handler(blocks, f"{kind}_refiner_checkpoint", "focus")
            # a config-only folder is no checkpoint: only the Config folder dropdown offers it
            assert refresh.fn()["choices"] == ["None", "sd_xl_refiner_1.0.safetensors"]
            assert component(blocks, f"{kind}_refiner_config_dir").value == "None"
            folders = handler(blocks, f"{kind}_refiner_config_dir", "focus")
            assert folders.fn()["choices"] == ["None", "refiner-configs"]  # the diffusers folders only
        form = ["a", "", "Euler", "Automatic", 4, 7, 64, 64, 1, 1, 1, 1]
        hires_off = [False, "Latent", 2, 0, 0, 0, 0.7, "", "", "Use same sampler", "Use same scheduler"]
        params = form_params(state, "txt2img", form, [],
                             [*hires_off, True, "sd_xl_refiner_1.0.safetensors", 0.7, "None"])
        assert params.refiner.endswith("sd_xl_refiner_1.0.safetensors") and params.refiner_switch_at == 0.7
        configured = form_params(state, "txt2img", form, [],
                                 [*hires_off, True, "sd_xl_refiner_1.0.safetensors", 0.7, "refiner-configs"])
        assert configured.refiner_config_dir == str(tmp_path / "models" / "refiner-configs")
        assert component(blocks, "txt2img_refiner_switch_at").maximum == 0.99  # A1111's 1 would refine nothing
        with pytest.raises(ValueError, match="refiner_switch_at must be a number strictly between 0 and 1"):
            state.check_params("txt2img", form_params(state, "txt2img", form, [],
                                                      [*hires_off, True, "sd_xl_refiner_1.0.safetensors", 1.0,
                                                       "None"]))
        # with hires fix, Settings' "Hires fix: which pass to enable refiner for" picks the refined pass(es)
        hires_on = [True, *hires_off[1:]]
        refiner_on = [True, "sd_xl_refiner_1.0.safetensors", 0.7, "None"]
        assert form_params(state, "txt2img", form, [], [*hires_on, *refiner_on]).hires_fix_refiner_pass == \
            "second pass"
        state.options.apply(state.options.check_update({"hires_fix_refiner_pass": "first pass"}))
        assert form_params(state, "txt2img", form, [], [*hires_on, *refiner_on]).hires_fix_refiner_pass == "first pass"


def test_a_config_folder_refusal_names_the_folder_as_picked(tmp_path):
    """The pipeline's check quotes the folder's server path; the UI answers in the name the user picked, as the API
    does (`sub_full`, the folder's model_name alias, here: the path, even redacted, would read `sub/full`)."""
    from types import SimpleNamespace

    import gradio as gr

    from .script_ui import _values
    from .ui_blocks import handler, model_less_ui

    with model_less_ui(tmp_path) as (state, blocks):
        for folder in ("sub/full", "refiner-dir"):
            (tmp_path / "models" / folder / "unet").mkdir(parents=True)
            (tmp_path / "models" / folder / "unet" / "config.json").write_text("{}")
        (tmp_path / "models" / "refiner-dir" / "unet" / "diffusion_pytorch_model.safetensors").write_bytes(b"x")
        state.catalog.refresh()
        run = handler(blocks, "txt2img_generate", "click")
        values = _values(run.inputs, {"task_id": "", "enable_refiner": True, "refiner_checkpoint": "refiner-dir",
                                      "refiner_config_dir": "sub_full"})
        request = SimpleNamespace(session_hash="picked", request=SimpleNamespace(scope={}))
        with pytest.raises(gr.Error) as caught:
            list(run.fn(request, *values))
    assert caught.value.message.startswith("refiner_config_dir='sub_full' applies to a single-file refiner; the "
                                           "refiner 'refiner-dir' is a diffusers folder"), caught.value.message


def test_png_info_of_a_refined_image_fills_the_accordion_and_makes_its_refiner(tmp_path, tiny_sdxl_dir,
                                                                               tiny_sdxl_refiner_dir):
    """The whole round trip: an image the pipeline refined, saved with its infotext, dropped on PNG Info and sent to
    txt2img and img2img: the accordion is on with the server's title of that refiner and its switch, and the form
    makes the call's refiner again."""
    import shutil

    from pipelines.png import save_png
    from pipelines.txt2img import TextToImage
    from webui.ui.generate_tab import form_params

    from .ui_blocks import handler, model_less_ui

    with model_less_ui(tmp_path) as (state, blocks):
        refiner = shutil.copytree(tiny_sdxl_refiner_dir, tmp_path / "models" / "xl-refiner")
        state.catalog.refresh()
        result = TextToImage.from_pretrained(tiny_sdxl_dir)(prompt="a red fox", width=64, height=64, steps=4, seed=3,
                                                            sampler="Euler", refiner=str(refiner),
                                                            refiner_switch_at=0.6)
        assert ", Refiner: xl-refiner [" in result.infotexts[0] and ", Refiner switch at: 0.6" in result.infotexts[0]
        png = save_png(result.images[0], tmp_path / "refined.png", result.infotexts[0])
        text, _, _ = handler(blocks, "pnginfo_image", "change").fn(str(png))
        assert text == result.infotexts[0]
        for kind in ("txt2img", "img2img"):
            send = handler(blocks, f"pnginfo_send_to_{kind}", "click")
            sent = {block.elem_id: update.get("value") if isinstance(update, dict) else update
                    for block, update in zip(send.outputs, send.fn(text, str(png)))}
            assert (sent[f"{kind}_enable_refiner"], sent[f"{kind}_refiner_checkpoint"],
                    sent[f"{kind}_refiner_switch_at"]) == (True, "xl-refiner", 0.6), kind
            assert sent["pnginfo_notes"] == "" or "Refiner" not in sent["pnginfo_notes"], sent["pnginfo_notes"]
        form = ["a red fox", "", "Euler", "Automatic", 4, 7, 64, 64, 1, 1, 3, 1]
        hires_off = [False, "Latent", 2, 0, 0, 0, 0.7, "", "", "Use same sampler", "Use same scheduler"]
        params = form_params(state, "txt2img", form, [], [*hires_off, True, "xl-refiner", 0.6, "None"])
        assert (params.refiner, params.refiner_switch_at) == (str(refiner), 0.6)
