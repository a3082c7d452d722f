"""MiniGPT-4 (Zhu et al. 2023): BLIP-2's frozen vision encoder and Q-Former, one trainable linear
layer, and a frozen chat LLM (Vicuna in the paper), with its conversation template.
"""

from __future__ import annotations

import torch
from torch import nn

from mixkit.models.vlm.modular.bridges import QFormerBridge
from mixkit.models.vlm.modular.model import VisionLanguageModel

MINIGPT4_TEMPLATE = "###Human: <Img><ImageHere></Img> {} ###Assistant:"
IMAGE_HERE = "<ImageHere>"


def minigpt4_prompt(question: str) -> str:
    """The chat prompt for one image and one question, as MiniGPT-4 was fine-tuned on."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question must be a non-empty string, got {question!r}")
    return MINIGPT4_TEMPLATE.format(question.strip())


def minigpt4_input_ids(tokenizer, question: str, num_query_tokens: int, image_token_index: int) -> list[int]:
    """Token ids of the prompt with `<ImageHere>` replaced by `num_query_tokens` placeholder ids."""
    before, after = minigpt4_prompt(question).split(IMAGE_HERE)
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    return (bos + tokenizer(before, add_special_tokens=False)["input_ids"] + [image_token_index] * num_query_tokens
            + tokenizer(after, add_special_tokens=False)["input_ids"])


def build_minigpt4(blip2: VisionLanguageModel, chat_language_model: nn.Module, *, image_token_index: int,
                   seed: int | None = None) -> VisionLanguageModel:
    """Reuse a (modular) BLIP-2's vision encoder and Q-Former; add a new linear layer into the chat LM.

    Everything but `bridge.projection` is frozen, which is the part MiniGPT-4 trains.
    """
    if not isinstance(blip2.bridge, QFormerBridge):
        raise TypeError(f"MiniGPT-4 needs a BLIP-2 model with a Q-Former bridge, got a {blip2.bridge.kind!r} bridge")
    import copy

    bridge = copy.deepcopy(blip2.bridge)
    if seed is not None:
        torch.manual_seed(seed)
    bridge.projection = nn.Linear(bridge.config.qformer.hidden_size, chat_language_model.config.hidden_size)
    bridge.config.output_size = chat_language_model.config.hidden_size
    model = VisionLanguageModel(copy.deepcopy(blip2.vision_encoder), bridge, chat_language_model,
                                image_token_index=image_token_index)
    return model.freeze("vision_encoder", "bridge.qformer", "bridge.query_tokens", "language_model")
