"""The task API shared by every vision-language model family, and the registry of families.

Each family (CLIP, SigLIP, BLIP-2, ...) is an adapter class around transformers' model and
processor. Contrastive families embed images and texts; generative families write text. Tasks
a family cannot do fail with a message naming a family that can.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Sequence

import torch

from mixkit.io.images import load_images
from mixkit.models.vlm.templates import ZERO_SHOT_TEMPLATES, check_template
from mixkit.registry import Registry

VLM_FAMILIES: Registry[type["VisionLanguageAdapter"]] = Registry("vision-language model family")

CONTRASTIVE_TASKS = frozenset({"embed_images", "embed_texts", "classify", "retrieve"})
GENERATIVE_TASKS = frozenset({"caption", "answer"})


@dataclass(frozen=True)
class Retrieval:
    """Top-k matches in both directions; scores are the model's similarity logits."""

    text_indices: torch.Tensor  # (images, k): best texts for each image
    text_scores: torch.Tensor
    image_indices: torch.Tensor  # (texts, k): best images for each text
    image_scores: torch.Tensor


def check_texts(texts: Sequence[str], what: str) -> list[str]:
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    if not texts:
        raise ValueError(f"{what} is empty: pass at least one string")
    bad = [t for t in texts if not isinstance(t, str)]
    if bad:
        raise TypeError(f"{what} must be strings, got {type(bad[0]).__name__} {bad[0]!r}")
    return texts


def retrieval_depths(k: Any, image_count: int, text_count: int) -> tuple[int, int]:
    """(texts per image, images per text) for `retrieve(..., k)`.

    A pair `(texts_per_image, images_per_text)` is taken exactly and each must fit its own candidates.
    One int serves both directions: a direction with fewer than k candidates returns all of them,
    ranked (so 1 image and 9 captions with k=5 gives 5 captions per image and the 1 image per
    caption); an int above both counts is refused, since neither direction could return k.
    """
    def is_count(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    if isinstance(k, tuple) and len(k) == 2 and all(is_count(v) for v in k):
        if k[0] > text_count or k[1] > image_count:
            raise ValueError(f"k={k} asks for {k[0]} texts per image and {k[1]} images per text, but there are "
                             f"{text_count} texts and {image_count} images; pass at most ({text_count}, {image_count})")
        return k
    if not is_count(k):
        raise ValueError(f"k must be a positive int (both directions) or a pair (texts_per_image, images_per_text) "
                         f"of positive ints, got {k!r}")
    if k > max(text_count, image_count):
        raise ValueError(f"k={k} is above both the {image_count} images and the {text_count} texts; pass "
                         f"k <= {max(text_count, image_count)}")
    return min(k, text_count), min(k, image_count)


class VisionLanguageAdapter:
    """A loaded model + processor with the mixkit task API; subclasses implement their tasks."""

    family: ClassVar[str] = ""
    tasks: ClassVar[frozenset[str]] = frozenset()
    default_batch_size: ClassVar[int] = 8
    # Zero-shot prompt templates when the caller gives none: CLIP's ImageNet ensemble (SigLIP has its own).
    default_templates: ClassVar[tuple[str, ...]] = ZERO_SHOT_TEMPLATES

    def __init__(self, model: Any, processor: Any, *, device: torch.device, dtype: torch.dtype, source: str) -> None:
        self.model = model
        self.processor = processor
        self.device = device
        self.dtype = dtype
        self.source = source

    @classmethod
    def from_folder(
        cls,
        folder: Path,
        *,
        source: str,
        device: torch.device,
        dtype: torch.dtype,
        attn_implementation: str,
        trust_remote_code: bool,
    ) -> "VisionLanguageAdapter":
        """Load a transformers checkpoint folder with its processor; mixkit's own formats override this."""
        from transformers import AutoModel, AutoModelForImageTextToText, AutoProcessor

        from mixkit.models.vlm.loading import keep_qformer_in_fp32

        model_class = AutoModelForImageTextToText if "caption" in cls.tasks else AutoModel
        model = model_class.from_pretrained(
            str(folder), dtype=dtype, attn_implementation=attn_implementation, trust_remote_code=trust_remote_code,
            local_files_only=True,
        ).to(device).eval()
        if dtype != torch.float32:
            keep_qformer_in_fp32(model)
        processor = AutoProcessor.from_pretrained(str(folder), trust_remote_code=trust_remote_code, local_files_only=True)
        return cls(model, processor, device=device, dtype=dtype, source=source)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(source={self.source!r}, device={self.device}, dtype={self.dtype})"

    def _unsupported(self, task: str) -> ValueError:
        able = [name for name, cls in VLM_FAMILIES.items() if task in cls.tasks]
        return ValueError(
            f"{self.source!r} is a {self.family!r} model, which cannot {task}; "
            f"load a model of family {', '.join(repr(a) for a in able)} for that"
        )

    def _images(self, images: Any) -> list:
        return load_images(images)

    # --- contrastive tasks -------------------------------------------------------------------
    def embed_images(self, images: Any) -> torch.Tensor:
        """L2-normalised image embeddings, (N, dim)."""
        raise self._unsupported("embed_images")

    def embed_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """L2-normalised text embeddings, (N, dim)."""
        raise self._unsupported("embed_texts")

    def similarity_logits(self, image_embeddings: torch.Tensor, text_embeddings: torch.Tensor) -> torch.Tensor:
        raise self._unsupported("classify")

    def label_probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        """Softmax over labels (CLIP); SigLIP overrides with independent sigmoids."""
        return logits.softmax(dim=-1)

    def classify(self, images: Any, labels: Sequence[str],
                 templates: Sequence[str] | None = None) -> list[dict[str, float]]:
        """Zero-shot label probabilities per image, with the text side averaged over `templates`
        (None: the family's `default_templates`)."""
        if "classify" not in self.tasks:
            raise self._unsupported("classify")
        if templates is None:
            templates = self.default_templates
        labels = check_texts(labels, "labels")
        templates = [check_template(t) for t in check_texts(templates, "templates")]
        if len(set(labels)) != len(labels):
            raise ValueError(f"labels must be distinct, got {labels}")
        image_embeddings = self.embed_images(images)
        prompts = [template.format(label) for label in labels for template in templates]
        per_prompt = self.embed_texts(prompts).view(len(labels), len(templates), -1)
        label_embeddings = torch.nn.functional.normalize(per_prompt.mean(dim=1), dim=-1)
        probabilities = self.label_probabilities(self.similarity_logits(image_embeddings, label_embeddings))
        return [dict(zip(labels, row.tolist())) for row in probabilities]

    def retrieve(self, images: Any, texts: Sequence[str], k: int | tuple[int, int] = 1) -> Retrieval:
        """The k best texts for each image and the k best images for each text.

        Each direction is ranked over its own candidates, as open_clip / LAVIS retrieval evaluation
        does (`logits.topk(k)` per direction): one image against a caption bank gets its top-k
        captions, one text against a gallery its top-k images. See `retrieval_depths` for `k`.
        """
        if "retrieve" not in self.tasks:
            raise self._unsupported("retrieve")
        texts = check_texts(texts, "texts")
        images = self._images(images)
        texts_per_image, images_per_text = retrieval_depths(k, len(images), len(texts))  # before any model work
        image_embeddings = self.embed_images(images)
        logits = self.similarity_logits(image_embeddings, self.embed_texts(texts))
        text_scores, text_indices = logits.topk(texts_per_image, dim=1)
        image_scores, image_indices = logits.T.topk(images_per_text, dim=1)
        return Retrieval(text_indices, text_scores, image_indices, image_scores)

    # --- generative tasks --------------------------------------------------------------------
    def caption(self, images: Any, prompt: str | None = None, **generation: Any) -> list[str]:
        """One caption per image, optionally continuing `prompt` (e.g. 'a photo of')."""
        raise self._unsupported("caption")

    def answer(self, images: Any, questions: Sequence[str], **generation: Any) -> list[str]:
        """One answer per (image, question) pair, in the family's VQA prompt format."""
        raise self._unsupported("answer")
