"""Settings > img2img colour correction (webui/ui/color_correction_settings.py): the option it sets and what the
img2img tab then runs."""

from __future__ import annotations

import pytest

from .test_ui_prompt_styles_and_options import img2img_tab_values
from .ui_blocks import component, handler, model_less_ui

KEY = "img2img_color_correction"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with model_less_ui(tmp_path_factory.mktemp("ui-color-correction")) as built_ui:
        yield built_ui


def test_the_checkbox_sets_a1111s_option_and_img2img_takes_it(built):
    from webui.ui.generate_tab import form_params

    state, blocks = built
    assert component(blocks, "settings_img2img_color_correction").value is False  # A1111's default: off
    form = ["a cube", "", "Euler", "Automatic", 2, 5.0, 64, 64, 11, 1, 1, 1]
    assert form_params(state, "img2img", form, [], img2img_tab_values()).color_correction is False
    apply = handler(blocks, "settings_apply_img2img_color_correction", "click").fn
    try:
        assert apply(True, True) == "Settings applied."
        assert (state.options.get(KEY), state.options.get("save_images_before_color_correction")) == (True, True)
        params = form_params(state, "img2img", form, [], img2img_tab_values())
        assert (params.color_correction, params.save_images_before_color_correction) == (True, True)
    finally:
        apply(False, False)
    assert state.options.get(KEY) is False
