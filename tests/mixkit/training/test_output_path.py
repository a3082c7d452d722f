"""`mixkit.training.output_path`: an output file a run cannot write is refused before training, naming the fix."""

from __future__ import annotations

import os

import pytest

from mixkit.training.output_path import check_output_path


def test_a_new_safetensors_file_in_a_folder_still_to_be_made_is_accepted(tmp_path):
    check_output_path(tmp_path / "new" / "deeper" / "style.safetensors")
    assert not (tmp_path / "new").exists()  # checked, not created


def test_a_folder_or_another_suffix_is_refused_with_the_name_to_use(tmp_path):
    with pytest.raises(ValueError) as raised:
        check_output_path(tmp_path)
    assert str(raised.value) == (f"output {str(tmp_path)!r} is a folder; name the LoRA file to write, like "
                                 f"{str(tmp_path / 'my_lora.safetensors')!r}")
    with pytest.raises(ValueError, match=r"must end in \.safetensors.*try '.*style\.safetensors'"):
        check_output_path(tmp_path / "style.ckpt")


def test_a_folder_path_through_a_file_is_refused(tmp_path):
    (tmp_path / "taken").write_text("x")
    with pytest.raises(ValueError, match=r"cannot be created: '.*taken' is a file; choose another output path"):
        check_output_path(tmp_path / "taken" / "sub" / "style.safetensors")


def test_a_folder_without_write_permission_is_refused(tmp_path, monkeypatch):
    # os.access stands in for the permission bits, which bind nobody when the tests run as root.
    monkeypatch.setattr(os, "access", lambda path, mode: path != tmp_path)
    with pytest.raises(ValueError, match=r"cannot be written: '.*' is not writable; choose another output path"):
        check_output_path(tmp_path / "style.safetensors")


def test_an_embedding_output_that_is_a_folder_is_named_as_an_embedding(tmp_path):
    from mixkit.training.ti_export import check_embedding_output

    with pytest.raises(ValueError) as raised:
        check_embedding_output(tmp_path)
    assert str(raised.value) == (f"output {str(tmp_path)!r} is a folder; name the embedding file to write, like "
                                 f"{str(tmp_path / 'my_embedding.safetensors')!r}")
