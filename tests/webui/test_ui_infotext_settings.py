"""Settings > Infotext (webui/ui/infotext_settings.py): one checkbox per A1111 switch, at the server's values; Apply
sets the options, and the next UI generation's infotext follows them (with the page's --auth user as `User`)."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pytest

from pipelines.infotext import parse_infotext
from webui.http_guards import AUTH_USER_KEY
from webui.options import INFOTEXT_OPTION_KEYS

from .test_ui_prompt_styles_and_options import UI_FIRST_PASS, form_values
from .ui_blocks import built_ui, component, handler


@pytest.fixture(scope="module")
def built(tiny_sd1_dir, tmp_path_factory):
    with built_ui(tiny_sd1_dir, tmp_path_factory.mktemp("ui-infotext-settings")) as pair:
        yield pair


def generate_as(blocks, user: str | None) -> str:
    """Press txt2img's Generate as a page whose request carries `user` (BasicAuthMiddleware's scope key)."""
    scope = {AUTH_USER_KEY: user} if user else {}
    request = SimpleNamespace(session_hash="infotext-settings", request=SimpleNamespace(scope=scope))
    updates = list(handler(blocks, "txt2img_generate", "click").fn(
        request, *form_values(blocks, "txt2img_generate", **UI_FIRST_PASS)))
    return updates[-1][3]


def test_the_checkboxes_set_the_options_and_the_next_generation_follows(built):
    state, blocks = built
    boxes = [component(blocks, f"settings_{key}") for key in INFOTEXT_OPTION_KEYS]
    assert [box.value for box in boxes] == [True, True, True, True, False, True, True, True, True]  # A1111's
    apply = handler(blocks, "settings_apply_infotext", "click").fn
    assert [block.elem_id for block in handler(blocks, "settings_apply_infotext", "click").inputs] == \
        [f"settings_{key}" for key in INFOTEXT_OPTION_KEYS]
    before = parse_infotext(generate_as(blocks, "bob"))
    assert {"Model", "Model hash", "Version"} <= set(before) and "User" not in before
    chosen = {**dict.fromkeys(INFOTEXT_OPTION_KEYS, True), "add_model_name_to_info": False,
              "add_version_to_infotext": False}
    try:
        assert apply(*chosen.values()) == "Settings applied."
        assert state.options.infotext_settings() == chosen
        after = generate_as(blocks, "bob")
        assert not {"Model", "Version"} & set(parse_infotext(after)) and "Model hash" in parse_infotext(after)
        assert after.endswith(", User: bob")
        assert "User" not in parse_infotext(generate_as(blocks, None))  # no --auth: nobody to name
    finally:
        apply(True, True, True, True, False, True, True, True, True)


def test_a_value_the_option_refuses_is_shown_as_an_error(built):
    _, blocks = built
    apply = handler(blocks, "settings_apply_infotext", "click").fn
    with pytest.raises(gr.Error, match="add_model_name_to_info"):
        apply(*["yes"] + [True] * (len(INFOTEXT_OPTION_KEYS) - 1))
