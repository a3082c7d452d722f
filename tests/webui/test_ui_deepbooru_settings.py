"""Settings > Interrogate, DeepBooru part: A1111's deepbooru options, applied with their own button and checked as
the API does."""

from __future__ import annotations

import gradio as gr
import pytest

from mixkit.interrogate import DeepbooruSettings

from .ui_blocks import component, handler, model_less_ui


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with model_less_ui(tmp_path_factory.mktemp("ui-deepbooru-settings")) as built_ui:
        yield built_ui


def apply(blocks, threshold=0.5, alpha=True, spaces=True, escape=True, filter_tags=""):
    return handler(blocks, "settings_apply_deepbooru", "click").fn(threshold, alpha, spaces, escape, filter_tags)


def test_the_widgets_show_a1111s_defaults(built):
    _, blocks = built
    slider = component(blocks, "settings_interrogate_deepbooru_score_threshold")
    assert (slider.minimum, slider.maximum, slider.step) == (0, 1, 0.01)
    assert component(blocks, "settings_deepbooru_filter_tags").label == "deepbooru: filter out those tags (separate by comma)"


def test_apply_sets_the_options_the_tagger_reads(built):
    state, blocks = built
    try:
        assert apply(blocks, 0.35, False, False, False, "solo, 1girl") == "Settings applied."
        assert state.options.deepbooru_settings() == DeepbooruSettings(
            score_threshold=0.35, sort_alpha=False, use_spaces=False, escape=False, filter_tags="solo, 1girl")
    finally:
        apply(blocks)
    assert state.options.deepbooru_settings() == DeepbooruSettings()


def test_a_threshold_out_of_range_is_refused_and_nothing_changes(built):
    state, blocks = built
    with pytest.raises(gr.Error, match=r"interrogate_deepbooru_score_threshold must be a number in \[0, 1\]"):
        apply(blocks, 1.5, False)
    assert state.options.deepbooru_settings() == DeepbooruSettings()
