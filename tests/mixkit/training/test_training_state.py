"""Checkpoints: atomic replacement (a failed save keeps the previous file), RNG round trip, mismatch error."""

from __future__ import annotations

import errno
import random

import numpy as np
import pytest
import torch

from mixkit.io import CheckpointWriteError
from mixkit.training import training_state
from mixkit.training.training_state import (
    CheckpointMismatchError, architecture_fingerprint, capture_rng_states, latest_checkpoint, load_training_state,
    restore_rng_states, save_training_state,
)


def _save(path, step, weight):
    layer = torch.nn.Linear(2, 2)
    with torch.no_grad():
        layer.weight.fill_(weight)
    optimizer = torch.optim.AdamW(layer.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    return save_training_state(path, step=step, fingerprint="abc", trainable=layer.state_dict(), optimizer=optimizer,
                               scheduler=scheduler, config_json="{}")


def test_disk_full_while_saving_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "step-00000001.pt"
    _save(path, 1, 1.0)

    def full_disk(obj, target):
        with open(target, "wb") as handle:
            handle.write(b"half a checkpoint")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(training_state.torch, "save", full_disk)
    with pytest.raises(CheckpointWriteError, match="previous file, if any, is unchanged"):
        _save(path, 2, 2.0)
    monkeypatch.undo()
    state = load_training_state(path, "abc")
    assert state["step"] == 1 and torch.equal(state["trainable"]["weight"], torch.ones(2, 2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000001.pt"]  # no temp file left behind


def test_latest_checkpoint_and_mismatch(tmp_path):
    _save(tmp_path / "step-00000002.pt", 2, 0.0)
    _save(tmp_path / "step-00000010.pt", 10, 0.0)
    (tmp_path / ".step-00000011.pt.x.tmp").write_bytes(b"crashed")
    assert latest_checkpoint(tmp_path).name == "step-00000010.pt"
    assert load_training_state(tmp_path, "abc")["step"] == 10
    with pytest.raises(CheckpointMismatchError, match="different model"):
        load_training_state(tmp_path, "other")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointMismatchError, match="junk.pt"):
        load_training_state(tmp_path / "junk.pt", "abc")
    with pytest.raises(FileNotFoundError, match="No checkpoint"):
        load_training_state(tmp_path / "sub" if (tmp_path / "sub").mkdir() is None else None, "abc")


def test_rng_states_round_trip():
    states = capture_rng_states()
    expected = (torch.rand(3), random.random(), np.random.rand(2))
    torch.rand(5), random.random(), np.random.rand(7)
    restore_rng_states(states)
    again = (torch.rand(3), random.random(), np.random.rand(2))
    assert torch.equal(expected[0], again[0]) and expected[1] == again[1] and np.array_equal(expected[2], again[2])


def test_fingerprint_depends_on_shapes_and_model_config():
    a = architecture_fingerprint({"x": torch.zeros(2, 3)}, {"unet": {"ch": 32}})
    assert a == architecture_fingerprint({"x": torch.ones(2, 3)}, {"unet": {"ch": 32}})
    assert a != architecture_fingerprint({"x": torch.zeros(3, 3)}, {"unet": {"ch": 32}})
    assert a != architecture_fingerprint({"x": torch.zeros(2, 3)}, {"unet": {"ch": 64}})


def test_resumed_settings_compare_as_the_checkpoint_stores_them(tmp_path):
    """The checkpoint keeps its config as JSON, where the betas tuple of optimizer_args is a list: that is no
    change, while another value is refused naming both."""
    import json

    from mixkit.training.training_state import check_same_settings

    state = {"config": json.dumps({"optimizer_args": {"betas": [0.9, 0.99]}, "learning_rate": 1e-4})}
    check_same_settings(state, {"optimizer_args": {"betas": (0.9, 0.99)}, "learning_rate": 1e-4}, "ckpt")
    with pytest.raises(CheckpointMismatchError, match=r"learning_rate: 0.0001 in the checkpoint, 0.0002 now"):
        check_same_settings(state, {"optimizer_args": {"betas": (0.9, 0.99)}, "learning_rate": 2e-4}, "ckpt")
