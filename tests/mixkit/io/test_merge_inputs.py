"""The merge's tensor-by-tensor reader: the same tensors safetensors' own loader gives, every dtype, no mmap."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from mixkit.errors import CheckpointFormatError
from mixkit.io.merge_inputs import CheckpointTensors, MergeSource, as_merge_source


def test_reads_every_tensor_exactly_as_safetensors(tmp_path):
    state = {"f32": torch.randn(3, 4), "f16": torch.randn(5).half(), "bf16": torch.randn(2, 2).bfloat16(),
             "i64": torch.arange(6).reshape(2, 3), "bool": torch.tensor([True, False]), "empty": torch.zeros(0, 3),
             "u8": torch.arange(4, dtype=torch.uint8)}
    file = tmp_path / "m.safetensors"
    save_file(state, file)
    reader = CheckpointTensors(file)
    expected = load_file(file)
    assert sorted(reader.keys()) == sorted(state) and "f32" in reader and "nope" not in reader
    for key in state:
        got = reader.get(key)
        assert got.dtype == expected[key].dtype and got.shape == expected[key].shape and torch.equal(got, expected[key])
    reader.close()


def test_a_file_cut_short_after_opening_is_refused(tmp_path):
    file = tmp_path / "m.safetensors"
    save_file({"w": torch.ones(1000)}, file)
    reader = CheckpointTensors(file)
    with open(file, "r+b") as handle:
        handle.truncate(file.stat().st_size - 100)
    with pytest.raises(CheckpointFormatError, match="ended inside tensor 'w'"):
        reader.get("w")


def test_sources_are_named_as_a1111_lists_them(tmp_path):
    file = tmp_path / "a.safetensors"
    save_file({"w": torch.ones(1)}, file)
    assert as_merge_source(file, "A") == MergeSource(file, "a.safetensors")
    assert MergeSource(file, "sub/dir/a.v2.safetensors").model_name == "sub_dir_a.v2"
    with pytest.raises(TypeError, match="A must be a checkpoint path"):
        as_merge_source(3, "A")
