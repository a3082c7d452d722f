"""atomic_output_path: all-or-nothing replacement of a file."""

from __future__ import annotations

import pytest

from mixkit.io.atomic import CheckpointWriteError, atomic_output_path, atomic_write_bytes


def test_write_bytes_creates_and_replaces(tmp_path):
    path = tmp_path / "a.json"
    atomic_write_bytes(path, b"one")
    atomic_write_bytes(path, b"two")
    assert path.read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_temp_file_is_hidden_in_the_same_folder(tmp_path):
    with atomic_output_path(tmp_path / "model.safetensors") as temp:
        assert temp.parent == tmp_path and temp.name.startswith(".model.safetensors.") and temp.suffix == ".tmp"
        temp.write_bytes(b"data")
        assert not (tmp_path / "model.safetensors").exists()  # invisible until complete
    assert (tmp_path / "model.safetensors").read_bytes() == b"data"


def test_error_in_body_keeps_old_file_and_propagates_unchanged(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"old")
    with pytest.raises(KeyError, match="boom"):
        with atomic_output_path(path) as temp:
            temp.write_bytes(b"half")
            raise KeyError("boom")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["model.safetensors"]


def test_os_error_in_body_becomes_write_error(tmp_path):
    path = tmp_path / "model.safetensors"
    with pytest.raises(CheckpointWriteError, match=r"model\.safetensors.*Input/output error") as info:
        with atomic_output_path(path):
            raise OSError(5, "Input/output error")
    assert isinstance(info.value, OSError)
    assert list(tmp_path.iterdir()) == []


def test_target_that_is_a_folder(tmp_path):
    (tmp_path / "out").mkdir()
    with pytest.raises(CheckpointWriteError, match="a folder with that name exists"):
        with atomic_output_path(tmp_path / "out"):
            pass  # pragma: no cover


def test_publish_permissions_makes_a_staged_folder_readable_like_open_would(tmp_path):
    import os
    import tempfile
    from pathlib import Path

    import torch
    from safetensors.torch import save_file

    from mixkit.io.atomic import publish_permissions

    staged = Path(tempfile.mkdtemp(dir=tmp_path))  # 0700, as every staged output starts
    (staged / "unet").mkdir()
    save_file({"w": torch.zeros(2)}, str(staged / "unet" / "model.safetensors"))  # 0600 (safetensors' own choice)
    (staged / "unet" / "link").symlink_to(staged / "unet" / "model.safetensors")
    old = os.umask(0o022)
    try:
        publish_permissions(staged)
    finally:
        os.umask(old)
    assert (staged.stat().st_mode & 0o777, (staged / "unet").stat().st_mode & 0o777) == (0o755, 0o755)
    assert (staged / "unet" / "model.safetensors").stat().st_mode & 0o777 == 0o644
