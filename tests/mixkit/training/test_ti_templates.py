"""Textual-inversion captions: kohya's template lists, A1111 template files, and the seeded pick."""

from __future__ import annotations

import pytest

from mixkit.training.ti_templates import (OBJECT_TEMPLATES, STYLE_TEMPLATES, CaptionTemplates, read_template_file)


def test_kohya_template_lists_in_a1111_form():
    assert (len(OBJECT_TEMPLATES), len(STYLE_TEMPLATES)) == (27, 19)  # kohya's imagenet_(style_)templates_small
    assert OBJECT_TEMPLATES[0] == "a photo of a [name]" and OBJECT_TEMPLATES[-1] == "a photo of a small [name]"
    assert STYLE_TEMPLATES[0] == "a painting in the style of [name]"
    assert all(line.count("[name]") == 1 and "{}" not in line for line in OBJECT_TEMPLATES + STYLE_TEMPLATES)


def test_fill_puts_token_and_caption_in_place():
    templates = CaptionTemplates(("a photo of [name], [filewords]",), "zqx")
    assert templates.captions(["red, square", "blue"], seed=1, micro_batch=0) == ["a photo of zqx, red, square",
                                                                                  "a photo of zqx, blue"]


def test_pick_depends_on_seed_micro_batch_and_row_only():
    templates = CaptionTemplates(OBJECT_TEMPLATES, "zqx")
    first = templates.captions(["x"] * 8, seed=3, micro_batch=5)
    assert templates.captions(["x"] * 8, seed=3, micro_batch=5) == first  # a resumed run draws the same
    assert len(set(first)) > 1  # rows draw on their own
    assert templates.captions(["x"] * 8, seed=3, micro_batch=6) != first
    assert templates.captions(["x"] * 8, seed=4, micro_batch=5) != first


def test_template_file_lines_and_refusals(tmp_path):
    path = tmp_path / "subject_filewords.txt"
    path.write_text("a photo of a [name], [filewords]\n\n  a rendering of a [name]  \npicture\n", encoding="utf-8")
    assert read_template_file(path) == ("a photo of a [name], [filewords]", "a rendering of a [name]", "picture")
    path.write_text("picture\n[filewords]\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"has no line with \[name\]"):
        read_template_file(path)
    with pytest.raises(ValueError, match="cannot be read"):
        read_template_file(tmp_path / "missing.txt")


def test_a1111_hypernetwork_template_is_the_object_templates_with_the_caption():
    """A1111's textual_inversion_templates/hypernetwork.txt: 27 lines, "a photo of a [filewords]" ... "a photo of a
    small [filewords]"; an embedding run refuses it (no [name]: the embedding would never train)."""
    from mixkit.training.hn_config import SDHypernetworkConfig
    from mixkit.training.ti_config import SDTextualInversionConfig
    from mixkit.training.ti_templates import NAMED_TEMPLATES

    lines = NAMED_TEMPLATES.get("hypernetwork.txt")
    assert len(lines) == 27 and lines[0] == "a photo of a [filewords]" and lines[-1] == "a photo of a small [filewords]"
    assert all("[name]" not in line and line.count("[filewords]") == 1 for line in lines)
    SDHypernetworkConfig(model="m", dataset="d", output="h.pt", template_name="hypernetwork.txt").check()
    with pytest.raises(ValueError, match=r"template_name 'hypernetwork.txt' has no \[name\] in its lines"):
        SDTextualInversionConfig(model="m", dataset="d", output="e.safetensors", init_word="dog",
                               template_name="hypernetwork.txt").check()
