"""Embedding files as A1111 v1.10 finds and names them: suffixes in any case (`textual_inversion.load_from_file`
upper-cases the extension before comparing with .PT/.BIN/.SAFETENSORS), `TI hashes` names without ":" and ","
(`sd_hijack_clip` forward: `name.replace(":", "").replace(",", "")`), and a folder signature for rescans."""

import os

import torch
from safetensors.torch import save_file

from mixkit.prompts import EmbeddingLibrary, PromptEncoder, build_conditioning_plan, ti_hashes_infotext


def test_upper_case_suffixes_are_embeddings(sd1_pipe, tmp_path):
    torch.save({"string_to_param": {"*": torch.randn(2, 32)}}, tmp_path / "UpperCase.PT")
    save_file({"emb_params": torch.randn(1, 32)}, tmp_path / "mixed.SafeTensors")
    torch.save({"string_to_param": {"*": torch.randn(1, 32)}}, tmp_path / "old.Bin")
    library = EmbeddingLibrary(tmp_path)
    assert library.names() == ["UpperCase", "mixed", "old"]
    encoder = PromptEncoder([sd1_pipe.tokenizer], [sd1_pipe.text_encoder], is_sdxl=False, embeddings=library)
    plan = build_conditioning_plan(encoder, ["a UpperCase circle"], [""], 1)
    assert plan.ti_hashes.startswith("UpperCase: ")


def test_a_safetensors_file_wins_whatever_the_case_of_either_suffix(tmp_path):
    torch.save({"string_to_param": {"*": torch.randn(1, 32)}}, tmp_path / "same.PT")
    save_file({"emb_params": torch.randn(1, 32)}, tmp_path / "same.SAFETENSORS")
    assert EmbeddingLibrary(tmp_path).get("same").path.name == "same.SAFETENSORS"


def test_ti_hashes_names_lose_colons_and_commas():
    assert ti_hashes_infotext({"bad,hand": "022c00f6d2da", "a:b": "123456789abc", "ok": "abcdefabcdef"}) == \
        "badhand: 022c00f6d2da, ab: 123456789abc, ok: abcdefabcdef"


def test_the_signature_changes_when_a_file_is_added_replaced_or_removed(tmp_path):
    path = tmp_path / "one.pt"
    torch.save({"string_to_param": {"*": torch.randn(1, 32)}}, path)
    library = EmbeddingLibrary(tmp_path)
    assert library.refreshed().signature() == library.signature()
    torch.save({"string_to_param": {"*": torch.randn(1, 32)}}, tmp_path / "two.pt")
    added = library.refreshed()
    assert added.signature() != library.signature()
    torch.save({"string_to_param": {"*": torch.randn(3, 32)}}, path)
    os.utime(path, ns=(1, 1))  # a new mtime even on file systems with coarse timestamps
    replaced = added.refreshed()
    assert replaced.signature() != added.signature()
    path.unlink()
    assert replaced.refreshed().signature() != replaced.signature()
