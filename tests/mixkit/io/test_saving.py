"""save_safetensors round-trips exactly and never leaves partial files behind."""

from __future__ import annotations

import os

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from mixkit.io import atomic
from mixkit.io.atomic import CheckpointWriteError
from mixkit.io.saving import save_safetensors


@pytest.fixture
def tensors():
    generator = torch.Generator().manual_seed(1)
    return {"w": torch.randn(3, 2, generator=generator), "ids": torch.arange(4, dtype=torch.int64)}


def assert_only(folder, names):
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)


def test_round_trip_with_metadata(tensors, tmp_path):
    path = tmp_path / "out.safetensors"
    save_safetensors(tensors, path, metadata={"ss_network_dim": "8"})
    loaded = load_file(path)
    assert set(loaded) == set(tensors) and all(torch.equal(loaded[k], tensors[k]) for k in tensors)
    with safe_open(path, framework="pt") as reader:
        assert reader.metadata() == {"ss_network_dim": "8"}
    assert_only(tmp_path, ["out.safetensors"])
    assert os.stat(path).st_mode & 0o777 == 0o644


def test_non_contiguous_tensor_is_saved_with_same_values(tmp_path):
    transposed = torch.arange(6.0).reshape(2, 3).t()
    save_safetensors({"t": transposed}, tmp_path / "t.safetensors")
    assert torch.equal(load_file(tmp_path / "t.safetensors")["t"], transposed)


def test_overwrite_keeps_the_old_mode(tensors, tmp_path):
    path = tmp_path / "out.safetensors"
    save_safetensors(tensors, path)
    os.chmod(path, 0o600)
    save_safetensors({"only": torch.zeros(1)}, path)
    assert set(load_file(path)) == {"only"} and os.stat(path).st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    "bad_tensors, bad_metadata, message",
    [
        ([torch.ones(1)], None, "must be a mapping"),
        ({1: torch.ones(1)}, None, "tensor names must be strings"),
        ({"a": [1.0]}, None, r"tensors\['a'\] must be a torch.Tensor"),
        ({"a": torch.ones(1)}, {"steps": 10}, r"metadata entries must be str -> str.*'steps': 10"),
    ],
)
def test_bad_inputs_are_type_errors_and_write_nothing(tmp_path, bad_tensors, bad_metadata, message):
    with pytest.raises(TypeError, match=message):
        save_safetensors(bad_tensors, tmp_path / "x.safetensors", metadata=bad_metadata)
    assert_only(tmp_path, [])


def test_shared_tensors_are_a_value_error_and_old_file_survives(tensors, tmp_path):
    path = tmp_path / "tied.safetensors"
    save_safetensors(tensors, path)
    before = path.read_bytes()
    base = torch.ones(4)
    with pytest.raises(ValueError, match="share memory"):
        save_safetensors({"a": base, "b": base}, path)
    assert path.read_bytes() == before
    assert_only(tmp_path, ["tied.safetensors"])


def test_parent_that_is_a_file(tensors, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    with pytest.raises(CheckpointWriteError, match=r"not-a-folder.*is a file, not a folder"):
        save_safetensors(tensors, blocker / "out.safetensors")
    assert_only(tmp_path, ["not-a-folder"])


def test_missing_parent_folder(tensors, tmp_path):
    with pytest.raises(CheckpointWriteError, match="does not exist"):
        save_safetensors(tensors, tmp_path / "nope" / "out.safetensors")
    assert_only(tmp_path, [])


def test_unwritable_folder(tensors, tmp_path, monkeypatch):
    folder = tmp_path / "readonly"
    folder.mkdir()
    if os.geteuid() == 0:  # root ignores chmod; make creating the temp file fail instead
        def refuse(*args, **kwargs):
            raise PermissionError(13, "Permission denied")
        monkeypatch.setattr(atomic.tempfile, "mkstemp", refuse)
    else:
        folder.chmod(0o500)
    try:
        with pytest.raises(CheckpointWriteError, match=r"readonly.*Permission denied"):
            save_safetensors(tensors, folder / "out.safetensors")
    finally:
        folder.chmod(0o700)
    assert_only(folder, [])


@pytest.mark.parametrize("fail_in", ["save_file", "os.replace"])
def test_failure_mid_write_leaves_old_file_and_no_temp(tensors, tmp_path, monkeypatch, fail_in):
    path = tmp_path / "model.safetensors"
    save_safetensors(tensors, path)
    before = path.read_bytes()

    def disk_full(*args, **kwargs):
        if fail_in == "save_file":  # write some bytes first, like a real disk-full mid-write
            with open(args[1], "wb") as handle:
                handle.write(b"partial")
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        if fail_in == "save_file":
            patch.setattr("safetensors.torch.save_file", disk_full)
        else:
            patch.setattr(atomic.os, "replace", disk_full)
        with pytest.raises(CheckpointWriteError, match=r"model\.safetensors.*No space left.*unchanged"):
            save_safetensors({"new": torch.zeros(2)}, path)
    assert path.read_bytes() == before
    assert_only(tmp_path, ["model.safetensors"])
    save_safetensors({"new": torch.zeros(2)}, path)  # still usable once the disk has room again
    assert set(load_file(path)) == {"new"}
