"""Fixtures for the checkpoint I/O tests: hostile pickles and an isolated hash cache."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest


class RunsShellCommand:
    """Unpickling this calls os.system(command): the classic malicious-checkpoint payload."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


@pytest.fixture(autouse=True)
def isolated_hash_cache(tmp_path, monkeypatch) -> Path:
    """Keep every test's hash cache out of the real ~/.cache."""
    folder = tmp_path / "mixkit-cache"
    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def sentinel(tmp_path) -> Path:
    """A file that exists only if a malicious payload ran."""
    return tmp_path / "SENTINEL"


@pytest.fixture
def malicious_checkpoints(tmp_path, sentinel) -> dict[str, Path]:
    """The same os.system payload saved as plain pickle, torch zip and legacy torch stream."""
    import torch

    payload = {"state_dict": {"weight": torch.ones(2)}, "hook": RunsShellCommand(f"touch {sentinel}")}
    folder = tmp_path / "malicious"
    folder.mkdir()
    files = {
        "pickle": folder / "plain.ckpt",
        "pickle-protocol2": folder / "plain-p2.ckpt",
        "torch-zip": folder / "zip.pt",
        "torch-legacy": folder / "legacy.bin",
    }
    with open(files["pickle"], "wb") as handle:
        pickle.dump({"hook": RunsShellCommand(f"touch {sentinel}")}, handle)
    with open(files["pickle-protocol2"], "wb") as handle:
        pickle.dump({"hook": RunsShellCommand(f"touch {sentinel}")}, handle, protocol=2)
    torch.save(payload, files["torch-zip"])
    torch.save(payload, files["torch-legacy"], _use_new_zipfile_serialization=False)
    return files
