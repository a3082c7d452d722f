"""Modular InstructBLIP imported from transformers: the instruction reaches the Q-Former, outputs match."""

from __future__ import annotations

import pytest
import torch

from mixkit.models.vlm.modular import from_hf_blip2, from_hf_instructblip
from mixkit.testing.tiny_vlm import TINY_NUM_QUERY_TOKENS, tiny_blip2_config

IMAGE_TOKEN = 4
QFORMER_VOCAB = 40


def hf_instructblip():
    from transformers import InstructBlipConfig, InstructBlipForConditionalGeneration

    blip2 = tiny_blip2_config("opt", image_token_index=IMAGE_TOKEN)
    qformer = dict(blip2.qformer_config.to_dict(), vocab_size=QFORMER_VOCAB, pad_token_id=0)
    config = InstructBlipConfig(vision_config=blip2.vision_config.to_dict(), qformer_config=qformer,
                                text_config=blip2.text_config.to_dict(), num_query_tokens=TINY_NUM_QUERY_TOKENS,
                                image_token_index=IMAGE_TOKEN)
    torch.manual_seed(0)
    return InstructBlipForConditionalGeneration(config).eval()


def lm_ids() -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded LM prompts: second row is two tokens shorter."""
    q = [IMAGE_TOKEN] * TINY_NUM_QUERY_TOKENS
    ids = torch.tensor([q + [2, 10, 11, 12], [1, 1] + q + [2, 13]])
    return ids, (ids != 1).long()


def instruction() -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded Q-Former instruction ids (BERT style), the second row shorter."""
    ids = torch.tensor([[5, 6, 7, 8, 9], [11, 12, 13, 0, 0]])
    return ids, (ids != 0).long()


def test_logits_match_transformers():
    hf = hf_instructblip()
    modular = from_hf_instructblip(hf)
    assert modular.bridge.takes_instruction
    pixels = torch.randn(2, 3, 30, 30, generator=torch.Generator().manual_seed(1))
    (ids, mask), (q_ids, q_mask) = lm_ids(), instruction()
    with torch.no_grad():
        expected = hf(pixel_values=pixels, input_ids=ids, attention_mask=mask, qformer_input_ids=q_ids,
                      qformer_attention_mask=q_mask).logits
        got = modular(pixels, ids, mask, instruction_ids=q_ids, instruction_mask=q_mask).logits
        # The instruction matters: another instruction gives other logits in both implementations.
        other = modular(pixels, ids, mask, instruction_ids=q_ids.flip(0), instruction_mask=q_mask.flip(0)).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(other, expected, atol=1e-3)


def test_padded_instruction_tokens_are_ignored():
    modular = from_hf_instructblip(hf_instructblip())
    pixels = torch.randn(1, 3, 30, 30, generator=torch.Generator().manual_seed(3))
    ids = torch.tensor([[IMAGE_TOKEN] * TINY_NUM_QUERY_TOKENS + [2, 10]])
    with torch.no_grad():
        short = modular(pixels, ids, instruction_ids=torch.tensor([[11, 12, 13]])).logits
        padded = modular(pixels, ids, instruction_ids=torch.tensor([[11, 12, 13, 0, 0]]),
                         instruction_mask=torch.tensor([[1, 1, 1, 0, 0]])).logits
    torch.testing.assert_close(padded, short, atol=1e-5, rtol=1e-5)


def test_greedy_generation_matches_transformers():
    hf = hf_instructblip()
    modular = from_hf_instructblip(hf)
    pixels = torch.randn(2, 3, 30, 30, generator=torch.Generator().manual_seed(2))
    (ids, mask), (q_ids, q_mask) = lm_ids(), instruction()
    with torch.no_grad():
        expected = hf.generate(pixel_values=pixels, input_ids=ids, attention_mask=mask, qformer_input_ids=q_ids,
                               qformer_attention_mask=q_mask, max_new_tokens=6, do_sample=False)[:, ids.shape[1]:]
    got = modular.generate(pixels, ids, mask, instruction_ids=q_ids, instruction_mask=q_mask, max_new_tokens=6)
    assert got.shape == (2, 6)
    assert torch.equal(got, expected)


def test_instruction_is_refused_by_a_blip2_bridge():
    from transformers import Blip2ForConditionalGeneration

    torch.manual_seed(0)
    blip2 = from_hf_blip2(Blip2ForConditionalGeneration(tiny_blip2_config("opt", image_token_index=IMAGE_TOKEN)))
    assert not blip2.bridge.takes_instruction
    with pytest.raises(ValueError, match="does not read instructions"):
        blip2(torch.randn(1, 3, 30, 30), lm_ids()[0][:1], instruction_ids=torch.tensor([[5, 6]]))


def test_only_instructblip_models_are_imported():
    with pytest.raises(TypeError, match="InstructBlipForConditionalGeneration.*Linear"):
        from_hf_instructblip(torch.nn.Linear(2, 2))
