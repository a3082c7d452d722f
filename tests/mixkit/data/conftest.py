"""Small image folders written on the fly: solid colours, so content is known exactly."""

from __future__ import annotations

from pathlib import Path

import pytest


def write_image(path: Path, size=(40, 32), colour=(200, 30, 30)) -> Path:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)
    return path


@pytest.fixture
def image_writer():
    return write_image
