"""`checkpoint_shapes` (mixkit/io/key_shapes.py): names and shapes of every format, no weight read, pickles only
through the safe reader."""

from __future__ import annotations

import zipfile

import pytest

from mixkit.errors import CheckpointFormatError, UnsafeCheckpointError
from mixkit.io import checkpoint_shapes

EXPECTED = {"model.diffusion_model.input_blocks.0.0.weight": (8, 4, 3, 3), "cond_stage_model.scale": (1,)}


@pytest.fixture
def state():
    import torch

    return {name: torch.zeros(shape) for name, shape in EXPECTED.items()}


def test_a_safetensors_file_lists_its_header(state, tmp_path):
    from safetensors.torch import save_file

    save_file(state, tmp_path / "model.safetensors")
    assert checkpoint_shapes(tmp_path / "model.safetensors") == EXPECTED


@pytest.mark.parametrize("zip_format", [True, False], ids=["torch-zip", "legacy"])
def test_a_lightning_ckpt_lists_its_flattened_state_dict(state, tmp_path, zip_format):
    """A1111 .ckpt files nest the weights under "state_dict" next to bookkeeping, which is no tensor."""
    import torch

    torch.save({"state_dict": state, "global_step": 7}, tmp_path / "model.ckpt",
               _use_new_zipfile_serialization=zip_format)
    assert checkpoint_shapes(tmp_path / "model.ckpt") == EXPECTED


def test_a_zip_ckpt_is_read_without_its_weight_records(state, tmp_path):
    """The weights' bytes emptied out of the archive: the shapes come from data.pkl alone, so nothing of the
    (gigabytes of) weights was read."""
    import torch

    torch.save({"state_dict": state}, tmp_path / "full.ckpt")
    with zipfile.ZipFile(tmp_path / "full.ckpt") as source, zipfile.ZipFile(tmp_path / "hollow.ckpt", "w") as hollow:
        for info in source.infolist():
            is_weights = "/data/" in info.filename and not info.filename.endswith(".pkl")
            hollow.writestr(info, b"" if is_weights else source.read(info))
    assert checkpoint_shapes(tmp_path / "hollow.ckpt") == EXPECTED
    with pytest.raises(CheckpointFormatError):  # the control: loading the weights needs the records
        from mixkit.io import load_state_dict

        load_state_dict(tmp_path / "hollow.ckpt")


@pytest.mark.parametrize("kind", ["pickle", "torch-zip", "torch-legacy"])
def test_a_pickle_that_imports_code_is_refused_without_running_it(malicious_checkpoints, sentinel, kind):
    with pytest.raises(UnsafeCheckpointError, match=r"posix\.system"):
        checkpoint_shapes(malicious_checkpoints[kind])
    assert not sentinel.exists()


def test_a_file_that_is_no_checkpoint_is_named(tmp_path):
    (tmp_path / "notes.ckpt").write_text("not a checkpoint")
    with pytest.raises(CheckpointFormatError, match="notes.ckpt"):
        checkpoint_shapes(tmp_path / "notes.ckpt")
