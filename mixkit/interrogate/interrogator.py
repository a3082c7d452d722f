"""`ClipInterrogator`: a caption followed by the best terms of each word list, as A1111's "Interrogate CLIP".

The caption itself comes from the caller (the web UI runs AppFlow's captioning app), so this module needs only
a CLIP model: `terms(image, settings)` ranks every category, and `join_terms` writes A1111's answer,
"caption, term, term" (or "caption, (term:0.123)" with `return_ranks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from mixkit.interrogate.categories import DEFAULT_DICT_LIMIT, Category, builtin_categories, read_categories
from mixkit.interrogate.holding import HeldBetweenUses
from mixkit.interrogate.ranking import TextEmbeddingCache, rank_lines

DEFAULT_CLIP = "mixkit-tiny-clip"  # shipped, offline; openai/clip-vit-large-patch14 is A1111's ViT-L/14


def _whole(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be a whole number in [{low}, {high}], got {value!r}.")


@dataclass(frozen=True)
class InterrogateSettings:
    """A1111's Settings > Interrogate values (its option names without the `interrogate_` prefix).

    The caption lengths count new tokens of the captioner. A1111's BLIP defaults (24 and 48) would make a short
    captioner such as mixkit-tiny-blip2 pad its 12-word captions with noise, so min_length starts at 1 here.
    """

    return_ranks: bool = False
    clip_dict_limit: int = DEFAULT_DICT_LIMIT
    clip_skip_categories: tuple[str, ...] = ()
    keep_models_in_memory: bool = False
    clip_num_beams: int = 1
    clip_min_length: int = 1
    clip_max_length: int = 48

    def __post_init__(self) -> None:
        for name in ("return_ranks", "keep_models_in_memory"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"interrogate_{name} must be true or false, got {getattr(self, name)!r}.")
        if isinstance(self.clip_dict_limit, bool) or not isinstance(self.clip_dict_limit, int) or self.clip_dict_limit < 0:
            raise ValueError("interrogate_clip_dict_limit must be a whole number >= 0 (0 = no limit), "
                             f"got {self.clip_dict_limit!r}.")
        skip = self.clip_skip_categories
        if isinstance(skip, str) or not isinstance(skip, (list, tuple)) or not all(isinstance(s, str) for s in skip):
            raise ValueError(f"interrogate_clip_skip_categories must be a list of category names, got {skip!r}.")
        object.__setattr__(self, "clip_skip_categories", tuple(skip))
        _whole("interrogate_clip_num_beams", self.clip_num_beams, 1, 16)  # A1111's slider bounds
        _whole("interrogate_clip_min_length", self.clip_min_length, 1, 128)
        _whole("interrogate_clip_max_length", self.clip_max_length, 1, 256)
        if self.clip_min_length > self.clip_max_length:
            raise ValueError(f"interrogate_clip_min_length ({self.clip_min_length}) must not exceed "
                             f"interrogate_clip_max_length ({self.clip_max_length}).")

    def caption_options(self) -> dict[str, int]:
        """The captioning options (LAVIS' names, as AppFlow's image_caption task takes them)."""
        return {"num_beams": self.clip_num_beams, "min_length": self.clip_min_length,
                "max_length": self.clip_max_length}


def join_terms(caption: str, terms: list[tuple[str, float]], return_ranks: bool) -> str:
    """A1111's answer: the caption, then ", term" per term, or ", (term:0.123)" (its probability) with ranks."""
    return caption + "".join(f", ({term}:{score:.3f})" if return_ranks else f", {term}" for term, score in terms)


class ClipInterrogator(HeldBetweenUses):
    """Ranks word lists against images with one CLIP model, loaded on first use.

    `clip_source` is a shipped name, a transformers CLIP folder or a hub id; `categories_dir` an A1111-style
    folder of word lists (None: the built-in shapes-world lists). The model is dropped after each call unless
    `keep_models_in_memory` is set or a `held()` block is open (a Loopback job: `mixkit.interrogate.holding`); the
    lists' text embeddings stay cached either way.
    """

    def __init__(self, clip_source: str = DEFAULT_CLIP, categories_dir: str | Path | None = None, *,
                 device: str = "cpu", loader: Callable[..., Any] | None = None) -> None:
        if not isinstance(clip_source, str) or not clip_source.strip():
            raise ValueError(f"clip_source must be a CLIP model name, folder or hub id, got {clip_source!r}.")
        if categories_dir is not None and not Path(categories_dir).expanduser().is_dir():
            raise ValueError(f"The interrogate categories folder {str(categories_dir)!r} does not exist; create it "
                             "with one *.txt word list per category or fix the path.")
        self.clip_source = clip_source
        self.categories_dir = categories_dir
        self.device = device
        self._loader = loader
        self._clip = None
        self._init_holds()
        self.cache = TextEmbeddingCache()

    def categories(self, settings: InterrogateSettings) -> list[Category]:
        """The lists ranked under `settings` (skip list and dict limit applied); ValueError names a bad entry."""
        if self.categories_dir is None:
            return builtin_categories(skip=settings.clip_skip_categories, dict_limit=settings.clip_dict_limit)
        return read_categories(self.categories_dir, skip=settings.clip_skip_categories,
                               dict_limit=settings.clip_dict_limit)

    def _model(self):
        if self._clip is None:
            if self._loader is not None:
                self._clip = self._loader(self.clip_source)
            else:
                from mixkit.models.vlm import load_vlm

                self._clip = load_vlm(self.clip_source, device=self.device)
            if not callable(getattr(self._clip, "embed_texts", None)):
                self._clip = None
                raise TypeError(f"The interrogate CLIP model {self.clip_source!r} is no CLIP/SigLIP image-text "
                                 "model; pass a CLIP checkpoint (e.g. openai/clip-vit-large-patch14).")
        return self._clip

    def load(self) -> None:
        """Load the CLIP now instead of at the first image, so a command over many images reports a model that
        cannot load before it starts. It then stays loaded until `unload()` or a use that does not keep it."""
        with self._lock:
            self._model()

    def _drop(self) -> None:
        self._clip = None

    def unload(self) -> None:
        """Drop the CLIP model (A1111 moves it to RAM; on a CPU server dropping is what frees memory)."""
        with self._lock:
            self._drop()

    @torch.no_grad()
    def terms(self, image: Any, settings: InterrogateSettings) -> list[tuple[str, float]]:
        """The best terms of every category for one PIL image, in category order, each with its probability."""
        if not isinstance(settings, InterrogateSettings):
            raise TypeError(f"settings must be InterrogateSettings, got {type(settings).__name__}")
        categories = self.categories(settings)  # a bad skip name or folder fails before the model loads
        with self._lock:
            try:
                clip = self._model()
                image_embedding = clip.embed_images([image])
                found: list[tuple[str, float]] = []
                for category in categories:
                    texts = self.cache.get(self.clip_source, category.items, clip.embed_texts)
                    logits = clip.similarity_logits(image_embedding, texts.to(image_embedding.device))
                    found.extend(rank_lines(logits, category.items, category.top_n))
                return found
            finally:
                self._after_use(settings.keep_models_in_memory)
