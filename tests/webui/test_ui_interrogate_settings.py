"""Settings > Interrogate: A1111's interrogate_* options, applied with their own button and checked as the API does."""

from __future__ import annotations

import gradio as gr
import pytest

from .ui_blocks import component, handler, model_less_ui


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with model_less_ui(tmp_path_factory.mktemp("ui-interrogate-settings")) as built_ui:
        yield built_ui


def apply(blocks, keep=False, ranks=False, beams=1, least=1, most=48, limit=1500, skip=()):
    return handler(blocks, "settings_apply_interrogate", "click").fn(keep, ranks, beams, least, most, limit, list(skip))


def test_the_skip_list_offers_the_categories_this_server_ranks(built):
    _, blocks = built
    choices = [choice[0] for choice in component(blocks, "settings_interrogate_clip_skip_categories").choices]
    assert choices == ["shapes", "colours", "sizes"]


def test_apply_sets_the_options_the_api_reads(built):
    state, blocks = built
    try:
        assert apply(blocks, keep=True, ranks=True, beams=3, least=2, most=30, limit=0.0, skip=["sizes"]) == \
            "Settings applied."
        assert state.options.interrogate_settings() == state.options.interrogate_settings().__class__(
            return_ranks=True, clip_dict_limit=0, clip_skip_categories=("sizes",), keep_models_in_memory=True,
            clip_num_beams=3, clip_min_length=2, clip_max_length=30)
    finally:
        apply(blocks)


def test_a_min_length_over_the_max_is_refused_and_nothing_changes(built):
    state, blocks = built
    with pytest.raises(gr.Error, match=r"interrogate_clip_min_length \(60\) must not exceed"):
        apply(blocks, least=60, most=48, ranks=True)
    assert state.options.get("interrogate_return_ranks") is False
