"""A1111's Hypertile outside the Python API: Settings > Hypertile (`/sdapi/v1/options`' hypertile_* keys), which
every request reads unless override_settings changes them, a pasted infotext's "Hypertile U-Net: True" ... keys
(A1111's options carry those infotext names), the built-in script's `alwayson_scripts` entry, and the UI panel."""

from __future__ import annotations

import gradio as gr
import pytest

from pipelines.approx.hypertile_settings import HyperTile
from pipelines.params import GenerationLimits
from webui.a1111_builtin_scripts import unsupported_scripts
from webui.api_convert import to_txt2img_params
from webui.api_infotext import apply_infotext
from webui.api_requests import Txt2ImgRequest
from webui.options import ServerOptions

from .ui_blocks import component, handler, model_less_ui

BASE = "a red circle\nSteps: 4, Sampler: Euler, CFG scale: 7, Seed: 1, Size: 64x64"


def _convert(body: dict, options: dict | None = None):
    return to_txt2img_params(Txt2ImgRequest(**body), limits=GenerationLimits(), lora_names=None,
                             sampler_options=options)


def test_settings_then_override_settings_make_the_params():
    request = {"prompt": "a red circle", "steps": 4}
    assert _convert(request).hypertile is None  # A1111's default: off
    assert _convert(request, {"hypertile_enable_unet": True, "hypertile_max_tile_unet": 128}).hypertile \
        == HyperTile(unet_max_tile=128)
    overridden = _convert({**request, "override_settings": {"hypertile_enable_vae": True,
                                                            "hypertile_swap_size_vae": 2.0}},
                          {"hypertile_enable_unet": True})
    assert overridden.hypertile == HyperTile(vae=True, vae_swap_size=2)
    with pytest.raises(ValueError, match=r"hypertile_swap_size_unet: .*\[1, 64\]"):
        _convert({**request, "override_settings": {"hypertile_enable_unet": True, "hypertile_swap_size_unet": 0}})


def test_a_pasted_infotext_sets_the_options_it_records():
    pasted = apply_infotext(Txt2ImgRequest(infotext=BASE + ", Hypertile U-Net: True, Hypertile U-Net max depth: 1, "
                                                           "Hypertile VAE: True"))
    assert {key: value for key, value in pasted.override_settings.items() if key.startswith("hypertile")} == {
        "hypertile_enable_unet": True, "hypertile_max_depth_unet": 1, "hypertile_enable_vae": True}
    assert _convert(pasted.model_dump(exclude_unset=True)).hypertile == HyperTile(unet_max_depth=1, vae=True)


def test_options_have_a1111s_names_defaults_and_checks(tmp_path):
    options = ServerOptions(str(tmp_path), 0)
    snapshot = options.snapshot(None)
    assert (snapshot["hypertile_enable_unet"], snapshot["hypertile_max_tile_unet"], snapshot["hypertile_max_tile_vae"],
            snapshot["hypertile_swap_size_vae"]) == (False, 256, 128, 3)
    assert options.check_update({"hypertile_max_depth_unet": 2.0, "hypertile_enable_vae": True}) == {
        "hypertile_max_depth_unet": 2, "hypertile_enable_vae": True}
    for bad in ({"hypertile_enable_unet": "yes"}, {"hypertile_max_depth_unet": 4}, {"hypertile_max_tile_vae": 1.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            options.check_update(bad)


def test_the_settings_file_keeps_them(tmp_path):
    path = str(tmp_path / "settings.json")
    options = ServerOptions(str(tmp_path), 0, settings_file=path)
    options.apply(options.check_update({"hypertile_enable_unet": True, "hypertile_swap_size_unet": 1}))
    again = ServerOptions(str(tmp_path), 0, settings_file=path)
    assert again.sampler_params("Euler")["hypertile"] == HyperTile(unet_swap_size=1)


def test_the_builtin_scripts_entry_stays_accepted():
    assert unsupported_scripts({"Hypertile": {"args": []}, "hypertile": {"args": [True]}}) == []


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with model_less_ui(tmp_path_factory.mktemp("ui-hypertile")) as built_ui:
        yield built_ui


def test_the_settings_panel_sets_the_options(built):
    state, blocks = built
    assert component(blocks, "settings_hypertile_max_tile_unet").value == 256
    apply = handler(blocks, "settings_apply_hypertile", "click").fn
    try:
        assert apply(True, False, True, 2, 128, 4, 3, 256, 3) == "Settings applied."
        assert HyperTile.from_options(state.options.snapshot(None)) == HyperTile(
            unet_max_depth=2, unet_max_tile=128, unet_swap_size=4, vae=True, vae_max_tile=256)
        assert state.options.sampler_params("Euler")["hypertile"] == HyperTile.from_options(
            state.options.snapshot(None))
    finally:
        apply(False, False, False, 3, 256, 3, 3, 128, 3)
    assert state.options.sampler_params("Euler")["hypertile"] is None
    with pytest.raises(gr.Error, match="hypertile_swap_size_unet"):
        apply(True, False, False, 3, 256, 0, 3, 128, 3)


def test_the_web_ui_paste_names_the_settings_and_freeu():
    from webui.ui.paste_infotext import infotext_to_form_values

    text = BASE + ', RNG: CPU, Hypertile U-Net: True, FreeU: "b1=1.5, b2=1.6, s1=0.9, s2=0.2"'
    _, notes = infotext_to_form_values(text, GenerationLimits(), ["Euler"], ["Automatic"])
    assert any("Hypertile U-Net: True" in note and "Settings > Hypertile" in note for note in notes), notes
    assert any(note.startswith("FreeU (b1=1.5, b2=1.6, s1=0.9, s2=0.2)") for note in notes), notes


def test_an_api_infotext_with_freeu_is_refused_not_dropped():
    with pytest.raises(ValueError, match="made with FreeU, which the API cannot switch on"):
        apply_infotext(Txt2ImgRequest(infotext=BASE + ', FreeU: "b1=1.5, b2=1.6, s1=0.9, s2=0.2"'))
