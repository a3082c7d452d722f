"""Ranking a word list's lines against an image by CLIP similarity, with the lines' embeddings cached.

A1111 ranks with `softmax(100 * image_features @ text_features.T)` over the lines and reports each chosen line's
probability; 100 is OpenAI CLIP's learned logit scale, so here the model's own scale is used (the same number for
OpenAI's checkpoints, the right one for any other CLIP).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Callable, Sequence

import torch


def rank_lines(logits: torch.Tensor, items: Sequence[str], top_n: int) -> list[tuple[str, float]]:
    """The `top_n` best lines of one list with their softmax probability, best first.

    `logits` is (images, lines): the model's scaled image-text similarities; several images average their
    probabilities, as A1111 does.
    """
    if logits.ndim != 2 or logits.shape[1] != len(items):
        raise ValueError(f"logits must be (images, {len(items)}), got {tuple(logits.shape)}")
    probabilities = logits.float().softmax(dim=-1).mean(dim=0)
    best = probabilities.topk(min(top_n, len(items)))
    return [(items[index], float(value)) for value, index in zip(best.values.tolist(), best.indices.tolist())]


class TextEmbeddingCache:
    """Normalised text embeddings of whole word lists, by model and list content, so a list is embedded once.

    Keyed by the model's name and a digest of the lines: an edited file or another model is embedded anew.
    Least recently used lists are dropped past `max_lists` (an A1111 artists list is ~5000 x 768 floats).
    """

    def __init__(self, max_lists: int = 32) -> None:
        if isinstance(max_lists, bool) or not isinstance(max_lists, int) or max_lists < 1:
            raise ValueError(f"max_lists must be a whole number >= 1, got {max_lists!r}")
        self.max_lists = max_lists
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, str], torch.Tensor] = OrderedDict()
        self.misses = 0  # lists embedded (for callers that report it; tests check reuse with it)

    @staticmethod
    def key(model: str, items: Sequence[str]) -> tuple[str, str]:
        return model, hashlib.sha256("\n".join(items).encode("utf-8")).hexdigest()

    def get(self, model: str, items: Sequence[str], embed: Callable[[list[str]], torch.Tensor]) -> torch.Tensor:
        """The lines' embeddings, from `embed(lines)` the first time for this model and content."""
        key = self.key(model, items)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        embeddings = embed(list(items)).detach().cpu()
        with self._lock:
            self.misses += 1
            self._entries[key] = embeddings
            while len(self._entries) > self.max_lists:
                self._entries.popitem(last=False)
        return embeddings

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
