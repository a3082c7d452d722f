"""Import transformers' LLaVA checkpoints into mixkit's modular `VisionLanguageModel`.

LLaVA-1.5 is a CLIP vision tower read at a hidden layer (the penultimate by default), its patch
tokens (CLS dropped under the "default" select strategy) mapped by a two-layer MLP into a chat LM.
transformers 5 keeps the LM as a bare base model (`model.language_model`) with the head beside
it (`lm_head`), so the import rebuilds the matching `...ForCausalLM` and fills it from both.
"""

from __future__ import annotations

import copy

import torch

from mixkit.models.vlm.modular.bridges import MLPBridge, ProjectionBridgeConfig
from mixkit.models.vlm.modular.model import VisionLanguageModel

SELECT_STRATEGIES = {"default": True, "full": False}
"""LLaVA's `vision_feature_select_strategy` -> whether the CLS token is dropped."""


def _causal_lm_from_parts(text_config, base_model: torch.nn.Module, lm_head: torch.nn.Module) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    language_model = AutoModelForCausalLM.from_config(copy.deepcopy(text_config))
    state = {f"model.{k}": v for k, v in base_model.state_dict().items()}
    state.update({f"lm_head.{k}": v for k, v in lm_head.state_dict().items()})
    language_model.load_state_dict(state, strict=True)
    return language_model.to(next(base_model.parameters()).dtype)


def from_hf_llava(hf_model) -> VisionLanguageModel:
    """A modular copy of a `LlavaForConditionalGeneration` (weights copied, not shared).

    Feed it the ids transformers' LLaVA takes: the `<image>` token already expanded to one id per
    patch (LlavaProcessor does that), since the image features replace those placeholders.
    """
    if type(hf_model).__name__ != "LlavaForConditionalGeneration":
        raise TypeError(f"expected transformers' LlavaForConditionalGeneration, got {type(hf_model).__name__}")
    config = hf_model.config
    strategy = config.vision_feature_select_strategy
    if strategy not in SELECT_STRATEGIES:
        raise ValueError(f"LLaVA config vision_feature_select_strategy {strategy!r} is not supported; "
                         f"supported: {sorted(SELECT_STRATEGIES)}")
    layer = config.vision_feature_layer
    layers = [layer] if isinstance(layer, int) else list(layer)
    projector = hf_model.model.multi_modal_projector
    bridge = MLPBridge(ProjectionBridgeConfig(
        input_size=config.vision_config.hidden_size * len(layers), output_size=config.text_config.hidden_size,
        hidden_act=config.projector_hidden_act, bias=getattr(config, "multimodal_projector_bias", True),
    ))
    state = {name.replace("linear_1.", "up.").replace("linear_2.", "down."): value
             for name, value in projector.state_dict().items()}
    bridge.load_state_dict(state, strict=True)
    bridge.to(projector.linear_1.weight.dtype)
    with torch.no_grad():
        language_model = _causal_lm_from_parts(config.text_config, hf_model.model.language_model, hf_model.lm_head)
        return VisionLanguageModel(
            copy.deepcopy(hf_model.model.vision_tower), bridge, language_model,
            image_token_index=config.image_token_index,
            vision_feature_layer=layer if isinstance(layer, int) else layers,
            drop_cls_token=SELECT_STRATEGIES[strategy],
        ).eval()
