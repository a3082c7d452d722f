"""MiniGPT-4 assembly: its prompt template, and the stage-2 LM loss training only the linear layer."""

from __future__ import annotations

import torch

from mixkit.models.vlm.modular import from_hf_blip2
from mixkit.models.vlm.modular.minigpt4 import build_minigpt4, minigpt4_input_ids, minigpt4_prompt
from mixkit.testing.tiny_vlm import tiny_blip2_config, tiny_byte_bpe_tokenizer
from mixkit.training.losses import build_lm_labels, causal_lm_loss


def test_prompt_template():
    assert minigpt4_prompt(" what is this? ") == "###Human: <Img><ImageHere></Img> what is this? ###Assistant:"


def chat_lm(vocab_size: int):
    from transformers import OPTConfig, OPTForCausalLM

    torch.manual_seed(3)
    return OPTForCausalLM(OPTConfig(vocab_size=vocab_size, hidden_size=24, num_hidden_layers=1, num_attention_heads=4,
                                    ffn_dim=32, max_position_embeddings=128, word_embed_proj_dim=24))


def test_lm_loss_trains_only_the_linear_layer():
    from transformers import Blip2ForConditionalGeneration

    tokenizer = tiny_byte_bpe_tokenizer()
    image_token = tokenizer.convert_tokens_to_ids("<image>")
    torch.manual_seed(0)
    blip2 = from_hf_blip2(Blip2ForConditionalGeneration(tiny_blip2_config("opt", vocab_size=len(tokenizer))))
    model = build_minigpt4(blip2, chat_lm(len(tokenizer)), image_token_index=image_token, seed=0)
    prompt = minigpt4_input_ids(tokenizer, "what is it?", 4, image_token)
    assert prompt.count(image_token) == 4 and prompt[0] == tokenizer.bos_token_id
    answer = tokenizer(" a cat", add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt + answer])
    mask = torch.ones_like(ids)
    labels = build_lm_labels(ids, mask, num_query_tokens=0, prompt_lengths=[len(prompt)])
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    loss = causal_lm_loss(model(torch.randn(1, 3, 30, 30), ids, mask).logits, labels)
    loss.backward()
    optimizer.step()
    changed = {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}
    assert changed == {"bridge.projection.weight", "bridge.projection.bias"}
    assert all(p.grad is None for name, p in model.named_parameters() if not name.startswith("bridge.projection"))
