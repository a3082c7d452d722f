"""rank_lines is A1111's softmax ranking; the text-embedding cache embeds a list once per model and content."""

from __future__ import annotations

import math

import pytest
import torch

from mixkit.interrogate.ranking import TextEmbeddingCache, rank_lines


def test_rank_lines_returns_the_top_n_softmax_probabilities_best_first():
    logits = torch.tensor([[0.0, math.log(3.0), math.log(2.0), 0.0]])  # softmax: 1/7, 3/7, 2/7, 1/7
    ranked = rank_lines(logits, ["a", "b", "c", "d"], 2)
    assert [term for term, _ in ranked] == ["b", "c"]
    assert [round(p, 6) for _, p in ranked] == [round(3 / 7, 6), round(2 / 7, 6)]
    assert len(rank_lines(logits, ["a", "b", "c", "d"], 10)) == 4  # top-N past the list's length: the whole list


def test_several_images_average_their_probabilities():
    logits = torch.tensor([[0.0, math.log(3.0)], [math.log(3.0), 0.0]])  # 1/4, 3/4 and 3/4, 1/4
    assert rank_lines(logits, ["a", "b"], 2) == [("a", pytest.approx(0.5)), ("b", pytest.approx(0.5))]


def test_rank_lines_refuses_logits_of_another_shape():
    with pytest.raises(ValueError, match=r"logits must be \(images, 3\)"):
        rank_lines(torch.zeros(1, 2), ["a", "b", "c"], 1)


def test_a_list_is_embedded_once_per_model_and_content():
    calls = []

    def embed(lines):
        calls.append(list(lines))
        return torch.ones(len(lines), 4)

    cache = TextEmbeddingCache()
    first = cache.get("clip-a", ("red", "blue"), embed)
    assert cache.get("clip-a", ("red", "blue"), embed) is first
    cache.get("clip-b", ("red", "blue"), embed)  # another model
    cache.get("clip-a", ("red", "green"), embed)  # an edited list
    assert calls == [["red", "blue"], ["red", "blue"], ["red", "green"]] and cache.misses == 3


def test_the_least_recently_used_list_is_dropped_past_the_bound():
    cache = TextEmbeddingCache(max_lists=2)
    embed = lambda lines: torch.zeros(len(lines), 2)  # noqa: E731
    for items in (("a",), ("b",), ("a",), ("c",)):  # "a" used again, so "b" is the oldest when "c" comes
        cache.get("m", items, embed)
    assert len(cache) == 2 and cache.misses == 3
    cache.get("m", ("a",), embed)
    assert cache.misses == 3
    cache.get("m", ("b",), embed)
    assert cache.misses == 4
