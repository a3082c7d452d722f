"""Writing a merged checkpoint: refused before the first byte when its folder cannot hold it."""

from __future__ import annotations

import errno
import shutil
from collections import namedtuple

import pytest
import torch

from mixkit.io.atomic import CheckpointWriteError
from mixkit.io.merge_output import save_merged

Usage = namedtuple("Usage", "total used free")


@pytest.mark.parametrize("checkpoint_format", ["safetensors", "ckpt"])
def test_a_folder_without_room_is_refused_before_writing(tmp_path, monkeypatch, checkpoint_format):
    tensors = {"model.w": torch.ones(256, 256)}  # 256 KiB
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(2 ** 30, 2 ** 30 - 2 ** 17, 2 ** 17))
    with pytest.raises(CheckpointWriteError, match=r"needs 256.0 KiB but .* has 128.0 KiB free; nothing was written") \
            as caught:
        save_merged(tensors, tmp_path / f"m.{checkpoint_format}", checkpoint_format, None)
    assert caught.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_a_folder_with_room_is_written(tmp_path, monkeypatch):
    tensors = {"model.w": torch.ones(256, 256)}
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(2 ** 30, 0, 2 ** 18))  # exactly the tensors' size
    save_merged(tensors, tmp_path / "m.ckpt", "ckpt", None)
    assert torch.equal(torch.load(tmp_path / "m.ckpt")["model.w"], tensors["model.w"])
