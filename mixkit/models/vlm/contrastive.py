"""CLIP and SigLIP: dual encoders for embeddings, zero-shot classification and retrieval."""

from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.nn.functional as F

from mixkit.models.vlm.family import CONTRASTIVE_TASKS, VLM_FAMILIES, VisionLanguageAdapter, check_texts
from mixkit.models.vlm.templates import SIGLIP_ZERO_SHOT_TEMPLATES


def _features(output: Any) -> torch.Tensor:
    """transformers 5 returns a model output whose pooler_output is projected; 4.x a tensor."""
    return output if isinstance(output, torch.Tensor) else output.pooler_output


class ContrastiveAdapter(VisionLanguageAdapter):
    tasks = CONTRASTIVE_TASKS
    text_padding: Any = True

    def _text_inputs(self, texts: list[str]) -> dict:
        max_length = getattr(self.model.config.text_config, "max_position_embeddings", 77)
        return self.processor.tokenizer(texts, padding=self.text_padding, truncation=True, max_length=max_length,
                                        return_tensors="pt")

    @torch.no_grad()
    def embed_images(self, images: Any) -> torch.Tensor:
        images = self._images(images)
        chunks = []
        for start in range(0, len(images), self.default_batch_size):
            pixels = self.processor.image_processor(images[start:start + self.default_batch_size], return_tensors="pt")
            pixel_values = pixels["pixel_values"].to(self.device, self.dtype)
            chunks.append(_features(self.model.get_image_features(pixel_values=pixel_values)).float())
        return F.normalize(torch.cat(chunks), dim=-1)

    @torch.no_grad()
    def embed_texts(self, texts: Sequence[str]) -> torch.Tensor:
        texts = check_texts(texts, "texts")
        chunks = []
        for start in range(0, len(texts), self.default_batch_size * 8):
            inputs = self._text_inputs(texts[start:start + self.default_batch_size * 8]).to(self.device)
            chunks.append(_features(self.model.get_text_features(**inputs)).float())
        return F.normalize(torch.cat(chunks), dim=-1)

    def similarity_logits(self, image_embeddings: torch.Tensor, text_embeddings: torch.Tensor) -> torch.Tensor:
        scale = self.model.logit_scale.detach().float().exp().to(image_embeddings.device)
        return scale * image_embeddings @ text_embeddings.T


@VLM_FAMILIES.register("clip")
class ClipAdapter(ContrastiveAdapter):
    """OpenAI CLIP and its re-trainings (`CLIPModel`): softmax over labels."""

    family = "clip"
    model_types = ("clip",)


@VLM_FAMILIES.register("siglip")
class SiglipAdapter(ContrastiveAdapter):
    """SigLIP (`SiglipModel`): sigmoid per label, texts padded to the fixed length it was trained with."""

    family = "siglip"
    model_types = ("siglip",)
    # SigLIP's text tower was trained without an attention mask on max-length padded text, so
    # shorter padding changes its embeddings; its processor pads to 64 tokens for that reason.
    text_padding = "max_length"
    # SigLIP's own zero-shot prompt (its model cards, and transformers' zero-shot-image-classification pipeline,
    # whose default hypothesis_template it is), not CLIP's ImageNet ensemble: so scores match the pipeline's.
    default_templates = SIGLIP_ZERO_SHOT_TEMPLATES

    def _text_inputs(self, texts: list[str]) -> dict:
        return self.processor.tokenizer(texts, padding="max_length", truncation=True, max_length=64, return_tensors="pt")

    def similarity_logits(self, image_embeddings: torch.Tensor, text_embeddings: torch.Tensor) -> torch.Tensor:
        scale = self.model.logit_scale.detach().float().exp().to(image_embeddings.device)
        bias = self.model.logit_bias.detach().float().to(image_embeddings.device)
        return scale * image_embeddings @ text_embeddings.T + bias

    def label_probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.sigmoid()
