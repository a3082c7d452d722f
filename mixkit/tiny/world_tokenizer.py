"""A word-level CLIP tokenizer for the shapes world: every world word is one token.

The tiny models must stay a few MB, so their text encoder cannot carry CLIP's 49408-row embedding
table, and spelling "triangle" out of eight byte tokens would make a tiny encoder waste its
capacity on spelling. Standard CLIP BPE can still express a word-level vocabulary: merges that fold
each world word into one symbol. Any other text still tokenizes (into byte symbols), so the
tokenizer is a normal `CLIPTokenizer` that every loader and the prompt language accept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from mixkit.data.shapes_vocab import COLOURS, POSITIONS, RELATIONS, SHAPES, SIZES
from mixkit.models.diffusion.single_file_tokenizer import clip_vocab_from_merges

# Words of captions besides the vocabulary lists (articles, prepositions, the caption frame) and
# words a user is likely to add to a prompt of this world.
FRAME_WORDS: tuple[str, ...] = (
    "a", "an", "and", "at", "on", "in", "of", "the", "background", "above", "below", "left", "right",
    "top", "bottom", "center", "centre", "shape", "shapes", "image", "picture", "photo", "what", "colour", "color",
    "is", "which", "where", "how", "many", "question", "answer", "short", "one", "two", "there",
)


def world_words() -> tuple[str, ...]:
    """Every word of the world, deduplicated, in a fixed order (the order decides token ids)."""
    words: list[str] = []
    for group in (FRAME_WORDS, SHAPES, COLOURS, SIZES, POSITIONS, RELATIONS):
        for phrase in group:
            for word in phrase.split():
                if word not in words:
                    words.append(word)
    return tuple(words)


def _bpe(word: str, ranks: dict[tuple[str, str], int]) -> list[str]:
    """CLIP's BPE on one lower-case word: repeatedly merge the lowest-ranked adjacent pair."""
    symbols = list(word[:-1]) + [word[-1] + "</w>"]
    while len(symbols) > 1:
        pairs = [(ranks.get(pair, float("inf")), i) for i, pair in enumerate(zip(symbols, symbols[1:]))]
        rank, i = min(pairs)
        if rank == float("inf"):
            break
        first, second = symbols[i], symbols[i + 1]
        merged, j = [], 0
        while j < len(symbols):
            if j < len(symbols) - 1 and symbols[j] == first and symbols[j + 1] == second:
                merged.append(first + second)
                j += 2
            else:
                merged.append(symbols[j])
                j += 1
        symbols = merged
    return symbols


def world_merges(words: Iterable[str]) -> list[tuple[str, str]]:
    """Merges under which each word is a single token.

    Words are added one at a time: BPE with the merges so far splits the word into some symbols,
    and merges folding those symbols left to right are appended. Appended merges rank after every
    earlier one, so they only fire once the earlier merges are exhausted, which leaves every
    earlier word's tokenization unchanged.
    """
    merges: list[tuple[str, str]] = []
    ranks: dict[tuple[str, str], int] = {}
    for word in words:
        symbols = _bpe(word, ranks)
        while len(symbols) > 1:
            pair = (symbols[0], symbols[1])
            if pair not in ranks:
                ranks[pair] = len(merges)
                merges.append(pair)
            symbols = [symbols[0] + symbols[1], *symbols[2:]]
    return merges


def build_world_tokenizer(words: Sequence[str] | None = None, model_max_length: int = 77):
    """A transformers `CLIPTokenizer` whose vocabulary holds every world word as one token."""
    from transformers import CLIPTokenizer

    merges = world_merges(words or world_words())
    vocab = clip_vocab_from_merges(merges)
    return CLIPTokenizer(vocab=vocab, merges=merges, pad_token="<|endoftext|>", model_max_length=model_max_length)


def save_world_tokenizer(folder: str | Path, words: Sequence[str] | None = None) -> Path:
    """Write the tokenizer files (vocab.json, merges.txt, configs) to `folder`."""
    folder = Path(folder)
    build_world_tokenizer(words).save_pretrained(folder)
    return folder
