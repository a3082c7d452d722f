"""Import transformers' BLIP-2 and InstructBLIP checkpoints into mixkit's modular `VisionLanguageModel`.

The vision tower and LM are transformers modules already, so they are copied as they are; only
the Q-Former's parameters are renamed into mixkit's layout (a pure name mapping, tested by
requiring every HF parameter to be consumed and every mixkit parameter to be filled).
"""

from __future__ import annotations

import copy
import re

import torch

from mixkit.models.vlm.modular.bridges import QFormerBridge, QFormerBridgeConfig
from mixkit.models.vlm.modular.model import VisionLanguageModel
from mixkit.models.vlm.modular.qformer import QFormerConfig

# (HF pattern, mixkit replacement) applied to names under Blip2ForConditionalGeneration.qformer.
_QFORMER_RENAMES = [
    (r"^layernorm\.", "input_norm."),
    # InstructBLIP's Q-Former embeds the instruction; its LayerNorm covers queries and text alike.
    (r"^embeddings\.layernorm\.", "input_norm."),
    (r"^embeddings\.(word_embeddings|position_embeddings)\.", r"\1."),
    (r"^encoder\.layer\.(\d+)\.attention\.attention\.(query|key|value)\.", r"layers.\1.self_attention.\2."),
    (r"^encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"layers.\1.self_attention.out."),
    (r"^encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.", r"layers.\1.self_attention.norm."),
    (r"^encoder\.layer\.(\d+)\.crossattention\.attention\.(query|key|value)\.", r"layers.\1.cross_attention.\2."),
    (r"^encoder\.layer\.(\d+)\.crossattention\.output\.dense\.", r"layers.\1.cross_attention.out."),
    (r"^encoder\.layer\.(\d+)\.crossattention\.output\.LayerNorm\.", r"layers.\1.cross_attention.norm."),
    (r"^encoder\.layer\.(\d+)\.intermediate_query\.dense\.", r"layers.\1.query_ffn.up."),
    (r"^encoder\.layer\.(\d+)\.output_query\.dense\.", r"layers.\1.query_ffn.down."),
    (r"^encoder\.layer\.(\d+)\.output_query\.LayerNorm\.", r"layers.\1.query_ffn.norm."),
    (r"^encoder\.layer\.(\d+)\.intermediate\.dense\.", r"layers.\1.text_ffn.up."),
    (r"^encoder\.layer\.(\d+)\.output\.dense\.", r"layers.\1.text_ffn.down."),
    (r"^encoder\.layer\.(\d+)\.output\.LayerNorm\.", r"layers.\1.text_ffn.norm."),
]


def rename_hf_qformer_key(name: str) -> str:
    """mixkit's name for one parameter of transformers' `Blip2QFormerModel`."""
    for pattern, replacement in _QFORMER_RENAMES:
        renamed, count = re.subn(pattern, replacement, name)
        if count:
            return renamed
    raise ValueError(f"unknown BLIP-2 Q-Former parameter {name!r}; this transformers version may use a new layout")


def qformer_config_from_hf(hf_config, attn_implementation: str = "sdpa", *, text_input: bool | None = None) -> QFormerConfig:
    """mixkit's Q-Former sizes from a BLIP-2 / InstructBLIP config; `text_input` forces the text path on."""
    q = hf_config.qformer_config
    if text_input is None:
        text_input = getattr(q, "use_qformer_text_input", False)
    return QFormerConfig(
        hidden_size=q.hidden_size, num_hidden_layers=q.num_hidden_layers, num_attention_heads=q.num_attention_heads,
        intermediate_size=q.intermediate_size, encoder_hidden_size=hf_config.vision_config.hidden_size,
        cross_attention_frequency=q.cross_attention_frequency, num_query_tokens=hf_config.num_query_tokens,
        layer_norm_eps=q.layer_norm_eps, hidden_act=q.hidden_act,
        text_vocab_size=q.vocab_size if text_input else 0,
        max_position_embeddings=q.max_position_embeddings, attn_implementation=attn_implementation,
    )


def _import_qformer_model(hf_model, expected: str, attn_implementation: str, instruction_aware: bool):
    if type(hf_model).__name__ != expected:
        raise TypeError(f"expected transformers' {expected}, got {type(hf_model).__name__}")
    config = hf_model.config
    bridge = QFormerBridge(QFormerBridgeConfig(
        qformer=qformer_config_from_hf(config, attn_implementation, text_input=instruction_aware or None),
        output_size=config.text_config.hidden_size, instruction_aware=instruction_aware,
    ))
    state = {"query_tokens": hf_model.query_tokens.detach()}
    state.update({f"projection.{k}": v for k, v in hf_model.language_projection.state_dict().items()})
    state.update({f"qformer.{rename_hf_qformer_key(k)}": v for k, v in hf_model.qformer.state_dict().items()})
    bridge.load_state_dict(state, strict=True)
    bridge.to(hf_model.query_tokens.dtype)
    with torch.no_grad():
        return VisionLanguageModel(
            copy.deepcopy(hf_model.vision_model), bridge, copy.deepcopy(hf_model.language_model),
            image_token_index=config.image_token_index,
        ).eval()


def from_hf_blip2(hf_model, *, attn_implementation: str = "sdpa") -> VisionLanguageModel:
    """A modular copy of a `Blip2ForConditionalGeneration` (weights copied, not shared)."""
    return _import_qformer_model(hf_model, "Blip2ForConditionalGeneration", attn_implementation, False)


def from_hf_instructblip(hf_model, *, attn_implementation: str = "sdpa") -> VisionLanguageModel:
    """A modular copy of an `InstructBlipForConditionalGeneration` (weights copied, not shared).

    Its Q-Former is instruction-aware: pass the instruction's Q-Former token ids (InstructBLIP
    uses a BERT tokenizer for them, separate from the LM's) as `instruction_ids` /
    `instruction_mask` to `forward` and `generate`, where transformers takes `qformer_input_ids`.
    """
    return _import_qformer_model(hf_model, "InstructBlipForConditionalGeneration", attn_implementation, True)
