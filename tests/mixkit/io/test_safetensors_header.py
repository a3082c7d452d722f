"""Header parsing and validation of safetensors files, checked against the safetensors library."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from mixkit.errors import CheckpointFormatError
from mixkit.io.safetensors_header import read_safetensors_header, read_safetensors_metadata


def raw_safetensors(path, header: dict, data: bytes = b"") -> None:
    encoded = json.dumps(header).encode()
    path.write_bytes(len(encoded).to_bytes(8, "little") + encoded + data)


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "lora.safetensors"
    tensors = {"a": torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), "b": torch.zeros(5, dtype=torch.bfloat16)}
    save_file(tensors, path, metadata={"ss_network_dim": "4", "ss_output_name": "tiny"})
    return path


def test_metadata_matches_the_safetensors_library(saved):
    with safe_open(saved, framework="pt") as reader:
        expected = reader.metadata()
    assert read_safetensors_metadata(saved) == expected == {"ss_network_dim": "4", "ss_output_name": "tiny"}


def test_header_lists_tensors_like_the_library(saved):
    header = read_safetensors_header(saved)
    with safe_open(saved, framework="pt") as reader:
        assert sorted(k for k in header if k != "__metadata__") == sorted(reader.keys())
    assert header["a"]["dtype"] == "F32" and header["a"]["shape"] == [3, 4]


def test_file_without_metadata_gives_empty_dict(tmp_path):
    path = tmp_path / "plain.safetensors"
    save_file({"x": torch.ones(1)}, path)
    assert read_safetensors_metadata(path) == {}


def test_truncated_data_is_reported_as_truncated(saved, tmp_path):
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(saved.read_bytes()[:-7])
    with pytest.raises(CheckpointFormatError, match=r"cut\.safetensors.*truncated.*Re-download"):
        read_safetensors_header(cut)


def test_header_longer_than_the_file_is_truncated(saved, tmp_path):
    cut = tmp_path / "cut-header.safetensors"
    cut.write_bytes(saved.read_bytes()[:20])
    with pytest.raises(CheckpointFormatError, match=r"cut-header\.safetensors.*header needs \d+ bytes but only 12"):
        read_safetensors_header(cut)


def test_garbage_json_header(tmp_path):
    path = tmp_path / "garbage.safetensors"
    path.write_bytes((12).to_bytes(8, "little") + b"{not json!!}")
    with pytest.raises(CheckpointFormatError, match=r"garbage\.safetensors.*not valid UTF-8 JSON"):
        read_safetensors_header(path)


def test_header_that_is_not_an_object(tmp_path):
    path = tmp_path / "list.safetensors"
    path.write_bytes((2).to_bytes(8, "little") + b"[]")
    with pytest.raises(CheckpointFormatError, match="expected an object"):
        read_safetensors_header(path)


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"dtype": "F32", "shape": [2]}, "lacks dtype/shape/data_offsets"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}, "invalid data_offsets"),
        ({"dtype": "F32", "shape": [-1], "data_offsets": [0, 8]}, "invalid shape"),
        ({"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}, r"needs 12 bytes but data_offsets span 8"),
        # a crafted dtype: a list was a bare TypeError (unhashable), an unknown name the library's error mid-merge
        ({"dtype": ["F32"], "shape": [2], "data_offsets": [0, 8]}, r"unknown dtype \['F32'\]"),
        ({"dtype": "ZZZ", "shape": [2], "data_offsets": [0, 8]}, r"unknown dtype 'ZZZ' \(the format's are BF16, BOOL"),
    ],
)
def test_inconsistent_tensor_entries(tmp_path, entry, message):
    path = tmp_path / "bad.safetensors"
    raw_safetensors(path, {"w": entry}, data=bytes(8))
    with pytest.raises(CheckpointFormatError, match=message):
        read_safetensors_header(path)


def test_non_string_metadata_is_rejected(tmp_path):
    path = tmp_path / "meta.safetensors"
    raw_safetensors(path, {"__metadata__": {"steps": 10}})
    with pytest.raises(CheckpointFormatError, match="must map strings to strings"):
        read_safetensors_header(path)
