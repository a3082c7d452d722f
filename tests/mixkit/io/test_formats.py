"""Format detection looks at bytes, not file names."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from mixkit.errors import CheckpointFormatError, ModelNotFoundError
from mixkit.io.formats import detect_checkpoint_format, format_from_leading_bytes


def test_each_format_is_detected_whatever_the_extension(tmp_path):
    tensors = {"w": torch.arange(6, dtype=torch.float32)}
    save_file(tensors, tmp_path / "weights.ckpt")  # safetensors content, pickle-ish name
    torch.save(tensors, tmp_path / "zip.safetensors")
    torch.save(tensors, tmp_path / "legacy.safetensors", _use_new_zipfile_serialization=False)
    assert detect_checkpoint_format(tmp_path / "weights.ckpt") == "safetensors"
    assert detect_checkpoint_format(tmp_path / "zip.safetensors") == "torch-zip"
    assert detect_checkpoint_format(tmp_path / "legacy.safetensors") == "pickle"


def test_renamed_pickle_is_detected_as_pickle(malicious_checkpoints, tmp_path):
    renamed = tmp_path / "model.safetensors"
    renamed.write_bytes(malicious_checkpoints["pickle"].read_bytes())
    assert detect_checkpoint_format(renamed) == "pickle"


def test_safetensors_header_length_starting_with_0x80_is_not_mistaken_for_pickle():
    head = (384).to_bytes(8, "little") + b'{"'
    assert head[0] == 0x80
    assert format_from_leading_bytes(head) == "safetensors"


def test_pickle_frame_length_is_not_mistaken_for_safetensors():
    # protocol 4: PROTO 4, FRAME <8-byte length>; byte 8 is a high byte of the frame length
    head = b"\x80\x04\x95" + (0x7B).to_bytes(8, "little")
    assert format_from_leading_bytes(head) == "pickle"


def test_unknown_content_names_the_file_and_its_bytes(tmp_path):
    page = tmp_path / "model.safetensors"
    page.write_bytes(b"<!DOCTYPE html><html>404</html>")
    with pytest.raises(CheckpointFormatError, match=r"model\.safetensors.*3c 21 44 4f") as info:
        detect_checkpoint_format(page)
    assert "re-download" in str(info.value)


def test_empty_file_is_a_clear_error(tmp_path):
    empty = tmp_path / "empty.safetensors"
    empty.touch()
    with pytest.raises(CheckpointFormatError, match=r"empty\.safetensors.*empty \(0 bytes\)"):
        detect_checkpoint_format(empty)


def test_missing_path_is_model_not_found(tmp_path):
    with pytest.raises(ModelNotFoundError, match=r"nope\.ckpt.*does not exist"):
        detect_checkpoint_format(tmp_path / "nope.ckpt")


def test_folder_is_not_a_checkpoint_file(tmp_path):
    with pytest.raises(CheckpointFormatError, match="is a folder"):
        detect_checkpoint_format(tmp_path)


def test_non_path_argument_is_a_type_error():
    with pytest.raises(TypeError, match="str or os.PathLike"):
        detect_checkpoint_format(123)


def test_protocol_0_and_1_pickles_are_detected_as_pickle(tmp_path):
    import pickle

    for protocol in (0, 1):
        path = tmp_path / f"p{protocol}.ckpt"
        path.write_bytes(pickle.dumps({"state_dict": {"w": [1.0, 2.0]}}, protocol=protocol))
        assert detect_checkpoint_format(path) == "pickle"
    (tmp_path / "notes.ckpt").write_text("(not a pickle at all, just text)")
    with pytest.raises(CheckpointFormatError, match="not a recognised checkpoint"):
        detect_checkpoint_format(tmp_path / "notes.ckpt")
