"""Embedding files go through mixkit.io (format by content, pickle scan); files that cannot serve stay plain text."""

from __future__ import annotations

import os

import pytest
import torch
from safetensors.torch import save_file

from mixkit.errors import CheckpointFormatError, UnsafeCheckpointError
from mixkit.prompts import EmbeddingLibrary, PromptEncoder, load_textual_inversion


class _Payload:
    def __init__(self, sentinel):
        self.sentinel = sentinel

    def __reduce__(self):
        return (os.system, (f"touch {self.sentinel}",))


@pytest.fixture
def evil_pt(tmp_path):
    sentinel = tmp_path / "PWNED"
    path = tmp_path / "evil.pt"
    torch.save({"string_to_param": {"*": torch.randn(2, 32)}, "x": _Payload(sentinel)}, path)
    return path, sentinel


def sd1_encoder(pipe, library=None):
    return PromptEncoder([pipe.tokenizer], [pipe.text_encoder], is_sdxl=False, embeddings=library)


def test_unsafe_embedding_is_refused_naming_the_global_without_torch_advice(evil_pt):
    path, sentinel = evil_pt
    with pytest.raises(UnsafeCheckpointError, match=r"evil\.pt.*posix\.system") as info:
        load_textual_inversion(path)
    assert "Re-running" not in str(info.value) and "weights_only set to False" not in str(info.value)
    assert not sentinel.exists()


def test_safetensors_renamed_pt_loads_by_content(tmp_path):
    vectors = torch.randn(3, 32)
    save_file({"emb_params": vectors}, str(tmp_path / "renamed.pt"))
    torch.save({"string_to_param": {"*": vectors}}, tmp_path / "pickled.safetensors")
    assert torch.equal(load_textual_inversion(tmp_path / "renamed.pt").vectors[""], vectors)
    assert torch.equal(load_textual_inversion(tmp_path / "pickled.safetensors").vectors[""], vectors)


def test_zero_byte_embedding_says_it_is_empty(tmp_path):
    (tmp_path / "zero.pt").write_bytes(b"")
    with pytest.raises(CheckpointFormatError, match=r"zero\.pt.*is empty \(0 bytes\)"):
        load_textual_inversion(tmp_path / "zero.pt")


def test_a1111_training_metadata_is_kept(tmp_path):
    torch.save({"string_to_token": {"*": 265}, "string_to_param": {"*": torch.randn(3, 32)}, "name": "foo",
                "step": 1000, "sd_checkpoint": "abc123", "sd_checkpoint_name": "v1-5"}, tmp_path / "foo.pt")
    save_file({"emb_params": torch.randn(1, 32)}, str(tmp_path / "plain.safetensors"))
    foo = load_textual_inversion(tmp_path / "foo.pt")
    assert (foo.step, foo.sd_checkpoint, foo.sd_checkpoint_name) == (1000, "abc123", "v1-5")
    plain = load_textual_inversion(tmp_path / "plain.safetensors")
    assert (plain.step, plain.sd_checkpoint, plain.sd_checkpoint_name) == (None, None, None)


def test_library_lists_unreadable_files_as_skipped_not_as_names(tmp_path, evil_pt):
    save_file({"emb_params": torch.randn(2, 32)}, str(tmp_path / "good.safetensors"))
    (tmp_path / "empty.pt").write_bytes(b"")
    library = EmbeddingLibrary(tmp_path)
    assert library.names() == ["good"]
    assert library.file_names() == ["empty", "evil", "good"]
    skipped = library.skipped()
    assert sorted(skipped) == ["empty", "evil"] and "posix.system" in skipped["evil"]
    assert "evil" not in library and "good" in library
    with pytest.raises(UnsafeCheckpointError, match="posix.system"):  # asked for by name, the reason is raised
        library.get("evil")
    assert library.refreshed().skipped() == skipped


def test_a_prompt_word_matching_a_skipped_embedding_is_plain_text(sd1_pipe, tmp_path, evil_pt):
    """A1111 treats unloadable embeddings as text: "a red circle, evil" must not fail the generation."""
    library = EmbeddingLibrary(tmp_path)
    with_folder = sd1_encoder(sd1_pipe, library).encode("a red circle, evil")
    without = sd1_encoder(sd1_pipe).encode("a red circle, evil")
    torch.testing.assert_close(with_folder.hidden, without.hidden)
    assert with_folder.embeddings_used == {}
    assert not evil_pt[1].exists()


def test_names_for_leaves_out_another_familys_embeddings(sd1_pipe, sdxl_pipe, tmp_path):
    save_file({"emb_params": torch.randn(2, 32)}, str(tmp_path / "sd1emb.safetensors"))
    save_file({"clip_l": torch.randn(2, 32), "clip_g": torch.randn(2, 32)}, str(tmp_path / "xlemb.safetensors"))
    save_file({"emb_params": torch.randn(2, 768)}, str(tmp_path / "wide.safetensors"))
    library = EmbeddingLibrary(tmp_path)
    assert library.names_for([sd1_pipe.text_encoder], is_sdxl=False) == ["sd1emb"]
    assert library.names_for([sdxl_pipe.text_encoder, sdxl_pipe.text_encoder_2], is_sdxl=True) == ["xlemb"]
