"""Settings > Sampler parameters "Random number generator source" (webui/ui/rng_source_settings.py): the option it
sets, what the generate tabs then run, and what a pasted infotext's `RNG` tells."""

from __future__ import annotations

import pytest

from .test_ui_prompt_styles_and_options import img2img_tab_values
from .ui_blocks import component, handler, model_less_ui

KEY = "randn_source"
FORM = ["a cube", "", "Euler", "Automatic", 2, 5.0, 64, 64, 11, 1, 1, 1]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with model_less_ui(tmp_path_factory.mktemp("ui-rng-source")) as built_ui:
        yield built_ui


def test_the_radio_offers_a1111s_sources_and_sets_the_option_both_tabs_take(built):
    from webui.ui.generate_tab import form_params

    state, blocks = built
    radio = component(blocks, "settings_randn_source")
    assert list(radio.choices) == [("GPU", "GPU"), ("CPU", "CPU"), ("NV", "NV")]  # A1111's order
    assert radio.value == "CPU"  # mixkit's default
    assert form_params(state, "img2img", FORM, [], img2img_tab_values()).rng_source == "CPU"
    apply = handler(blocks, "settings_apply_randn_source", "click").fn
    try:
        assert apply("NV") == "Settings applied."
        assert state.options.get(KEY) == "NV"
        assert form_params(state, "img2img", FORM, [], img2img_tab_values()).rng_source == "NV"
    finally:
        apply("CPU")
    assert state.options.get(KEY) == "CPU"


def test_a_source_that_is_none_of_a1111s_is_refused_and_changes_nothing(built):
    import gradio as gr

    state, blocks = built
    apply = handler(blocks, "settings_apply_randn_source", "click").fn
    with pytest.raises(gr.Error, match="randn_source must be one of 'GPU', 'CPU', 'NV'"):
        apply("Philox")
    assert state.options.get(KEY) == "CPU"


TEXT = "a cat\nSteps: 20, Sampler: Euler a, Schedule type: Automatic, CFG scale: 7, Seed: 1, Size: 512x512"


@pytest.mark.parametrize("keys, note", [
    (", RNG: CPU", None),
    (", RNG: NV", "RNG: NV: the image's noise is NVIDIA's GPU noise (A1111's NV source); the RNG source is a Setting "
                  "here (Settings > Sampler parameters), not a form field; set it to NV to reproduce the image."),
    ("", "RNG: the image's noise was drawn on the GPU (A1111's default when the key is missing), which this server "
         "does not draw, so the same seed gives another image; if that GPU was an NVIDIA one, Settings > Sampler "
         "parameters' RNG source NV draws the same noise."),
])
def test_a_pasted_infotext_names_the_noise_it_needs(keys, note):
    from pipelines.params import GenerationLimits
    from webui.ui.paste_infotext import infotext_to_form_values

    _, notes = infotext_to_form_values(TEXT + keys, GenerationLimits(), ["Euler a"], ["Automatic"])
    assert notes == ([] if note is None else [note])
