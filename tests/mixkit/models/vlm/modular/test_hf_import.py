"""Modular BLIP-2 imported from transformers gives transformers' outputs (OPT and Flan-T5 variants)."""

from __future__ import annotations

import pytest
import torch

from mixkit.models.vlm.modular import from_hf_blip2
from mixkit.models.vlm.modular.hf_import import rename_hf_qformer_key
from mixkit.testing.tiny_vlm import TINY_NUM_QUERY_TOKENS, tiny_blip2_config

IMAGE_TOKEN = 4


def hf_blip2(language_model: str):
    from transformers import Blip2ForConditionalGeneration

    torch.manual_seed(0)
    return Blip2ForConditionalGeneration(tiny_blip2_config(language_model, image_token_index=IMAGE_TOKEN)).eval()


def prompt_ids() -> torch.Tensor:
    placeholders = [IMAGE_TOKEN] * TINY_NUM_QUERY_TOKENS
    return torch.tensor([placeholders + [2, 10, 11, 12], placeholders + [2, 13, 14, 15]])


@pytest.mark.parametrize("language_model", ["opt", "t5"])
def test_logits_match_transformers(language_model):
    hf = hf_blip2(language_model)
    modular = from_hf_blip2(hf)
    torch.manual_seed(1)
    pixels = torch.randn(2, 3, 30, 30)
    extra = {"decoder_input_ids": torch.tensor([[0, 5, 6], [0, 7, 8]])} if language_model == "t5" else {}
    with torch.no_grad():
        expected = hf(pixel_values=pixels, input_ids=prompt_ids(), **extra).logits
        got = modular(pixels, prompt_ids(), **extra).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # The copy owns its weights: changing it leaves transformers' model untouched and vice versa.
    with torch.no_grad():
        modular.bridge.qformer.layers[0].query_ffn.up.weight.normal_()
        assert not torch.allclose(modular(pixels, prompt_ids(), **extra).logits, expected, atol=1e-3)
        torch.testing.assert_close(hf(pixel_values=pixels, input_ids=prompt_ids(), **extra).logits, expected)


def test_greedy_generation_matches_transformers():
    hf = hf_blip2("opt")
    modular = from_hf_blip2(hf)
    pixels = torch.randn(2, 3, 30, 30, generator=torch.Generator().manual_seed(2))
    ids = prompt_ids()
    with torch.no_grad():
        expected = hf.generate(pixel_values=pixels, input_ids=ids, max_new_tokens=6, do_sample=False)[:, ids.shape[1]:]
    got = modular.generate(pixels, ids, max_new_tokens=6)
    assert torch.equal(got, expected)


def test_unknown_qformer_parameter_is_named():
    assert rename_hf_qformer_key("encoder.layer.3.crossattention.output.dense.bias") == "layers.3.cross_attention.out.bias"
    with pytest.raises(ValueError, match="encoder.layer.0.mystery.weight"):
        rename_hf_qformer_key("encoder.layer.0.mystery.weight")


def test_only_blip2_models_are_imported():
    with pytest.raises(TypeError, match="Linear"):
        from_hf_blip2(torch.nn.Linear(2, 2))
