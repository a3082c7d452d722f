"""The missing-caption policies of `mixkit.data.captions` chosen by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from mixkit.data.captions import MISSING_CAPTION_POLICIES


@pytest.mark.parametrize("file_name, caption", [
    ("003-a red ball.png", "a red ball"),  # A1111's [filewords]: leading numbering dropped
    ("12 blue cube.jpg", "blue cube"),
    ("plain.webp", "plain"),
    ("2024-01-05.png", ""),
])
def test_file_name_policy_captions_as_a1111(file_name, caption):
    assert MISSING_CAPTION_POLICIES.get("file_name")(Path("data") / file_name, "concept", ".txt") == caption


def test_folder_name_and_empty_policies():
    assert MISSING_CAPTION_POLICIES.get("folder_name")(Path("x.png"), "sks dog", ".txt") == "sks dog"
    assert MISSING_CAPTION_POLICIES.get("empty")(Path("x.png"), "sks dog", ".txt") == ""
