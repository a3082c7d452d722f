"""Embeddings bundled in a LoRA file (A1111's `bundle_emb.<word>.*`): read with the file, never unclaimed."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from mixkit.errors import CheckpointFormatError
from mixkit.lora import LoraRequest, apply_loras
from mixkit.lora.lora_file import load_lora
from mixkit.lora.report import inspect_lora
from mixkit.testing.tiny_lora import write_attention_lora


def _with_bundle(path, extra: dict) -> None:
    from safetensors.torch import load_file

    save_file({**load_file(str(path)), **extra}, str(path))


def test_sd1_and_sdxl_bundles_are_read_next_to_the_modules(tmp_path, sd1):
    path = write_attention_lora(sd1.unet, tmp_path / "concept.safetensors")
    modules = len(load_lora(path).modules)
    heart, l_vectors, g_vectors = torch.randn(2, 32), torch.randn(1, 32), torch.randn(1, 64)
    _with_bundle(path, {"bundle_emb.heart.string_to_param.*": heart,
                        "bundle_emb.xlword.clip_l": l_vectors, "bundle_emb.xlword.clip_g": g_vectors})
    lora = load_lora(path)
    assert lora.unclaimed_keys == [] and len(lora.modules) == modules
    assert set(lora.embeddings) == {"heart", "xlword"}
    assert torch.equal(lora.embeddings["heart"].vectors[""], heart)
    assert torch.equal(lora.embeddings["xlword"].vectors["clip_g"], g_vectors)
    assert lora.embeddings["heart"].shorthash == ""  # no file of its own: the Lora hash names it in infotext
    assert "heart (2 vectors, dim 32)" in "\n".join(inspect_lora(path).lines())


def test_a_file_holding_only_bundled_vectors_is_a_lora_without_modules(tmp_path):
    save_file({"bundle_emb.heart.string_to_param.*": torch.randn(1, 32)}, str(tmp_path / "word.safetensors"))
    lora = load_lora(tmp_path / "word.safetensors")
    assert lora.modules == [] and list(lora.embeddings) == ["heart"] and lora.format.name == "kohya"


def test_a_bundle_key_without_its_tensor_name_is_named(tmp_path):
    save_file({"bundle_emb.heart": torch.randn(1, 32)}, str(tmp_path / "odd.safetensors"))
    with pytest.raises(CheckpointFormatError, match="bundle_emb.<word>"):
        load_lora(tmp_path / "odd.safetensors")


def test_one_tensor_under_another_name_is_read_as_the_vectors(tmp_path):
    save_file({"bundle_emb.heart.emb_params": torch.randn(1, 32)}, str(tmp_path / "kohya.safetensors"))  # kohya's key
    assert load_lora(tmp_path / "kohya.safetensors").embeddings["heart"].num_vectors == 1


def test_two_loras_bundling_the_same_word_are_refused_before_the_model_changes(tmp_path, sd1):
    first = write_attention_lora(sd1.unet, tmp_path / "a.safetensors", seed=1)
    second = write_attention_lora(sd1.unet, tmp_path / "b.safetensors", seed=2)
    for path in (first, second):
        _with_bundle(path, {"bundle_emb.heart.string_to_param.*": torch.randn(1, 32)})
    before = {k: v.clone() for k, v in sd1.unet.state_dict().items()}
    with pytest.raises(ValueError, match="both bundle vectors for the word 'heart'"):
        apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(str(first)), LoraRequest(str(second))])
    assert all(torch.equal(before[k], v) for k, v in sd1.unet.state_dict().items())
