"""`VisionLanguageModel`: a vision encoder, a bridge and a language model, each swappable.

The vision encoder is any transformers vision tower (CLIP, SigLIP, BLIP-2's EVA ViT), the
bridge one of `BRIDGES`, the LM any causal or seq2seq transformers LM. Image embeddings replace
placeholder tokens (`image_token_index`) in the text, as BLIP-2 and LLaVA do in transformers, or
are prepended when the text has none. Parts are frozen independently by name.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch
from torch import nn

from mixkit.models.vlm.modular.bridges import Bridge, build_bridge
from mixkit.registry import Registry

VISION_TOWERS: Registry[str] = Registry("vision tower model_type")
for _model_type, _class_name in [
    ("clip_vision_model", "CLIPVisionModel"),
    ("siglip_vision_model", "SiglipVisionModel"),
    ("blip_2_vision_model", "Blip2VisionModel"),
    ("instructblip_vision_model", "InstructBlipVisionModel"),
]:
    VISION_TOWERS.register(_model_type, _class_name)

CONFIG_NAME = "mixkit_vlm.json"
WEIGHTS_NAME = "model.safetensors"


def vision_tower_from_config(config_dict: dict) -> nn.Module:
    import transformers

    class_name = VISION_TOWERS.get(config_dict.get("model_type"))
    model_class = getattr(transformers, class_name)
    config = model_class.config_class.from_dict(config_dict)
    return model_class(config)


def language_model_from_config(config_dict: dict) -> nn.Module:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    config_dict = dict(config_dict)
    config = AutoConfig.for_model(config_dict.pop("model_type"), **config_dict)
    auto = AutoModelForSeq2SeqLM if config.is_encoder_decoder else AutoModelForCausalLM
    return auto.from_config(config)


class VisionLanguageModel(nn.Module):
    """Image -> vision encoder -> bridge -> LM input embeddings -> LM."""

    PARTS = ("vision_encoder", "bridge", "language_model")

    def __init__(
        self,
        vision_encoder: nn.Module,
        bridge: Bridge,
        language_model: nn.Module,
        *,
        image_token_index: int | None = None,
        vision_feature_layer: int | list[int] | None = None,
        drop_cls_token: bool = False,
    ) -> None:
        super().__init__()
        self.vision_encoder = vision_encoder
        self.bridge = bridge
        self.language_model = language_model
        self.image_token_index = image_token_index
        self.vision_feature_layer = vision_feature_layer
        self.drop_cls_token = drop_cls_token

    # --- parts -------------------------------------------------------------------------------
    def freeze(self, *parts: str) -> "VisionLanguageModel":
        """Stop gradients into the named parts, e.g. freeze("vision_encoder", "bridge.qformer")."""
        modules, parameters = dict(self.named_modules()), dict(self.named_parameters())
        for part in parts:
            if part in modules and part != "":
                modules[part].requires_grad_(False)
            elif part in parameters:
                parameters[part].requires_grad_(False)
            else:
                choices = ", ".join(repr(n) for n in self.PARTS + ("bridge.qformer", "bridge.query_tokens"))
                raise ValueError(f"cannot freeze {part!r}: not a part of this model; use one of {choices}")
        return self

    def set_attn_implementation(self, implementation: str) -> "VisionLanguageModel":
        """Switch every part's attention kernel ("sdpa", "eager" or "mixkit") after building or loading."""
        for part in (self.vision_encoder, self.language_model):
            if hasattr(part, "set_attn_implementation"):
                part.set_attn_implementation(implementation)
        qformer_config = getattr(getattr(self.bridge, "config", None), "qformer", None)
        if qformer_config is not None:
            qformer_config.attn_implementation = implementation
            for module in self.bridge.modules():
                if hasattr(module, "implementation"):  # Q-Former attention layers read it at each call
                    module.implementation = implementation
        return self

    def frozen_parts(self) -> list[str]:
        return [name for name, module in self.named_children()
                if all(not p.requires_grad for p in module.parameters())]

    # --- forward -----------------------------------------------------------------------------
    def encode_images(self, pixel_values: torch.Tensor, instruction_ids=None, instruction_mask=None) -> torch.Tensor:
        """(batch, tokens, lm_width) embeddings the LM reads in place of the image.

        `vision_feature_layer` picks a hidden layer (LLaVA uses the penultimate) or a list of
        layers whose features are concatenated (LLaVA-NeXT style); `instruction_ids` feed an
        instruction-aware Q-Former (InstructBLIP) and are refused by other bridges.
        """
        vision_dtype = next(self.vision_encoder.parameters()).dtype
        layer = self.vision_feature_layer
        output = self.vision_encoder(pixel_values=pixel_values.to(vision_dtype), output_hidden_states=layer is not None)
        if layer is None:
            features = output.last_hidden_state
        elif isinstance(layer, int):
            features = output.hidden_states[layer]
        else:
            features = torch.cat([output.hidden_states[i] for i in layer], dim=-1)
        if self.drop_cls_token:
            features = features[:, 1:]
        if instruction_ids is None:
            return self.bridge(features)
        if not self.bridge.takes_instruction:
            raise ValueError(f"this model's {self.bridge.kind!r} bridge does not read instructions; "
                             "pass instruction_ids only to an InstructBLIP-style (instruction_aware) Q-Former")
        return self.bridge(features, instruction_ids, instruction_mask)

    def embed_inputs(
        self, pixel_values, input_ids, attention_mask=None, *, instruction_ids=None, instruction_mask=None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """LM input embeddings with the image spliced in at placeholders (or prepended), and the mask.

        Prepending to left-padded text (decoder-only batches) keeps the padding at the far left,
        [pad, image, text], so every row's last real token is where generation continues.
        """
        image_embeds = self.encode_images(pixel_values, instruction_ids, instruction_mask)
        embedding = self.language_model.get_input_embeddings()
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        placeholders = input_ids == self.image_token_index if self.image_token_index is not None else None
        if placeholders is not None and placeholders.any():
            counts = placeholders.sum(dim=1)
            if (counts != image_embeds.shape[1]).any():
                raise ValueError(
                    f"each text needs exactly {image_embeds.shape[1]} image placeholder tokens "
                    f"(id {self.image_token_index}), got {counts.tolist()}"
                )
            text_embeds = embedding(input_ids.masked_fill(placeholders, 0))
            image_embeds = image_embeds.to(text_embeds.dtype)
            return text_embeds.masked_scatter(placeholders.unsqueeze(-1), image_embeds), attention_mask
        text_embeds = embedding(input_ids)
        image_mask = torch.ones(image_embeds.shape[:2], dtype=attention_mask.dtype, device=attention_mask.device)
        embeds = torch.cat([image_embeds.to(text_embeds.dtype), text_embeds], dim=1)
        mask = torch.cat([image_mask, attention_mask], 1)
        if input_ids.shape[1] and (attention_mask[:, 0] == 0).any():  # left padded: move padding before the image
            order = mask.argsort(dim=1, stable=True)  # zeros first, real positions keep their order
            embeds = embeds.gather(1, order.unsqueeze(-1).expand_as(embeds))
            mask = mask.gather(1, order)
        return embeds, mask

    def forward(self, pixel_values, input_ids, attention_mask=None, *, instruction_ids=None, instruction_mask=None,
                **language_model_kwargs):
        inputs_embeds, attention_mask = self.embed_inputs(
            pixel_values, input_ids, attention_mask, instruction_ids=instruction_ids, instruction_mask=instruction_mask,
        )
        return self.language_model(inputs_embeds=inputs_embeds, attention_mask=attention_mask, **language_model_kwargs)

    @torch.no_grad()
    def generate(self, pixel_values, input_ids, attention_mask=None, *, instruction_ids=None, instruction_mask=None,
                 **generation):
        """Greedy by default; returns only the new tokens for decoder-only LMs."""
        inputs_embeds, attention_mask = self.embed_inputs(
            pixel_values, input_ids, attention_mask, instruction_ids=instruction_ids, instruction_mask=instruction_mask,
        )
        options = {"do_sample": False, "num_beams": 1, **generation}
        return self.language_model.generate(inputs_embeds=inputs_embeds, attention_mask=attention_mask, **options)

    # --- persistence -------------------------------------------------------------------------
    def config_dict(self) -> dict:
        return {
            "vision_encoder": self.vision_encoder.config.to_dict(),
            "bridge": self.bridge.config_dict(),
            "language_model": self.language_model.config.to_dict(),
            "image_token_index": self.image_token_index,
            "vision_feature_layer": self.vision_feature_layer,
            "drop_cls_token": self.drop_cls_token,
        }

    def save_pretrained(self, folder: str | os.PathLike) -> Path:
        """Write mixkit_vlm.json and model.safetensors; files appear only once fully written."""
        from safetensors.torch import save_model

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as scratch:
            save_model(self, os.path.join(scratch, WEIGHTS_NAME))
            Path(scratch, CONFIG_NAME).write_text(json.dumps(self.config_dict(), indent=2), encoding="utf-8")
            os.replace(os.path.join(scratch, WEIGHTS_NAME), folder / WEIGHTS_NAME)
            os.replace(os.path.join(scratch, CONFIG_NAME), folder / CONFIG_NAME)
        return folder

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike) -> "VisionLanguageModel":
        from safetensors.torch import load_model

        from mixkit.errors import CheckpointFormatError, ModelNotFoundError

        folder = Path(folder)
        config_file, weights_file = folder / CONFIG_NAME, folder / WEIGHTS_NAME
        if not config_file.is_file() or not weights_file.is_file():
            raise ModelNotFoundError(
                f"{str(folder)!r} is not a saved VisionLanguageModel: it needs {CONFIG_NAME} and {WEIGHTS_NAME}"
            )
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
            parts = (config["vision_encoder"], config["bridge"], config["language_model"])
        except (ValueError, KeyError) as error:
            raise CheckpointFormatError(f"{str(config_file)!r} is not a valid model config: {error!r}") from None
        model = cls(
            vision_tower_from_config(parts[0]), build_bridge(parts[1]), language_model_from_config(parts[2]),
            image_token_index=config.get("image_token_index"),
            vision_feature_layer=config.get("vision_feature_layer"),
            drop_cls_token=config.get("drop_cls_token", False),
        )
        try:
            load_model(model, str(weights_file), strict=True)
        except Exception as error:  # safetensors raises several types for corrupt or mismatched files
            raise CheckpointFormatError(f"{str(weights_file)!r} does not match {CONFIG_NAME}: {error}") from None
        return model.eval()
