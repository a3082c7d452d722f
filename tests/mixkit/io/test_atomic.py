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


def test_an_output_folder_appears_whole_or_not_at_all(tmp_path):
    from mixkit.io.atomic import atomic_output_folder

    target = tmp_path / "deep" / "model"
    with atomic_output_folder(target) as temp:
        assert temp.parent == target.parent and temp.name.startswith(".model.") and not target.exists()
        (temp / "weights.bin").write_bytes(b"w")
    assert (target / "weights.bin").read_bytes() == b"w"
    assert [p.name for p in target.parent.iterdir()] == ["model"]

    with pytest.raises(RuntimeError, match="serializer failed"):
        with atomic_output_folder(tmp_path / "broken") as temp:
            (temp / "half.bin").write_bytes(b"h")
            raise RuntimeError("serializer failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep"]  # no target, no hidden leftover


def test_an_output_folder_never_replaces_a_filled_one(tmp_path):
    from mixkit.io.atomic import atomic_output_folder, check_new_output_folder

    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="already exists and is not an empty folder"):
        check_new_output_folder(tmp_path / "taken")
    with pytest.raises(ValueError, match="already exists"):
        with atomic_output_folder(tmp_path / "taken") as temp:
            (temp / "new.bin").write_bytes(b"n")
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
    (tmp_path / "empty").mkdir()
    with atomic_output_folder(tmp_path / "empty") as temp:  # an empty folder may be filled
        (temp / "a").write_text("a")
    assert (tmp_path / "empty" / "a").is_file()


def test_a_replacing_output_folder_swaps_in_whole_and_keeps_the_old_one_on_failure(tmp_path):
    from mixkit.io.atomic import atomic_output_folder

    target = tmp_path / "recipe"
    target.mkdir()
    (target / "old.bin").write_bytes(b"old")
    with pytest.raises(RuntimeError, match="training crashed"):
        with atomic_output_folder(target, replace=True) as temp:
            (temp / "new.bin").write_bytes(b"new")
            raise RuntimeError("training crashed")
    assert [p.name for p in target.iterdir()] == ["old.bin"]  # a failed rebuild keeps the last good output
    with atomic_output_folder(target, replace=True) as temp:
        (temp / "new.bin").write_bytes(b"new")
        assert (target / "old.bin").is_file()  # the old output is readable until the new one is complete
    assert [p.name for p in target.iterdir()] == ["new.bin"]
    assert [p.name for p in tmp_path.iterdir()] == ["recipe"]  # neither the staged nor the old folder is left
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ValueError, match="already exists"):
        with atomic_output_folder(tmp_path / "a-file", replace=True) as temp:
            (temp / "n").write_text("n")
    assert (tmp_path / "a-file").read_text() == "x"


def test_an_output_folder_under_a_file_is_refused_before_any_work(tmp_path):
    from mixkit.io.atomic import check_new_output_folder

    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="cannot be created: .*afile' is a file"):
        check_new_output_folder(tmp_path / "afile" / "sub" / "deeper", "The model folder")
    check_new_output_folder(tmp_path / "new" / "deeper")  # missing folders are fine: they are made at the end
