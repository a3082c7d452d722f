"""Split a weighted, tokenized prompt into CLIP's 75-token chunks, as A1111 v1.10 does.

Rules: a chunk holds 75 tokens (+ BOS/EOS = 77); `BREAK` closes the current chunk; when a chunk
fills up within `comma_backtrack` tokens after a comma, the text after the comma moves to the next
chunk, so phrases are not cut in half; a textual-inversion embedding never straddles two chunks.
Embeddings moved by the comma rule keep their vectors. This differs from A1111 v1.10 on purpose: its
`tokenize_line` moves the tokens after the comma to the next chunk but leaves the chunk's `fixes` behind, so
the moved embedding's placeholder tokens (id 0) are encoded as that token in the new chunk, and its vectors
are written into the padding of the previous chunk. Only a prompt whose embedding lies after the last comma
of a full 75-token chunk (within `comma_backtrack` tokens of its end) is affected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

CHUNK_TOKENS = 75
COMMA_BACKTRACK = 20
PLACEHOLDER_TOKEN = 0  # stands where embedding vectors go; replaced before the encoder's first layer


@dataclass
class PromptChunk:
    tokens: list[int] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    fixes: list[tuple[int, str]] = field(default_factory=list)  # (offset in tokens, embedding name)


@dataclass(frozen=True)
class TokenRun:
    """The tokens of one emphasis run, all with the same weight."""

    tokens: tuple[int, ...]
    weight: float


BREAK_RUN = TokenRun((), float("nan"))  # sentinel; identity-compared

# find_embedding(tokens, position) -> (name, number of prompt tokens its name spans, vector count) | None
EmbeddingFinder = Callable[[tuple, int], "tuple[str, int, int] | None"]


def split_into_chunks(runs: list[TokenRun], *, comma_token: int | None, find_embedding: EmbeddingFinder | None = None,
                      comma_backtrack: int = COMMA_BACKTRACK) -> list[PromptChunk]:
    """Chunks of at most 75 tokens (without BOS/EOS/padding, which `frame_chunk` adds)."""
    chunks: list[PromptChunk] = []
    chunk = PromptChunk()
    last_comma = -1

    def close() -> None:
        nonlocal chunk, last_comma
        chunks.append(chunk)
        chunk = PromptChunk()
        last_comma = -1

    for run in runs:
        if run is BREAK_RUN:
            close()
            continue
        tokens, position = run.tokens, 0
        while position < len(tokens):
            token = tokens[position]
            if token == comma_token:
                last_comma = len(chunk.tokens)
            elif (comma_backtrack and len(chunk.tokens) == CHUNK_TOKENS and last_comma != -1
                  and len(chunk.tokens) - last_comma <= comma_backtrack):
                cut = last_comma + 1
                moved = PromptChunk(chunk.tokens[cut:], chunk.weights[cut:],
                                    [(offset - cut, name) for offset, name in chunk.fixes if offset >= cut])
                chunk.tokens, chunk.weights = chunk.tokens[:cut], chunk.weights[:cut]
                chunk.fixes = [fix for fix in chunk.fixes if fix[0] < cut]
                close()
                chunk = moved
            if len(chunk.tokens) == CHUNK_TOKENS:
                close()
            found = find_embedding(tokens, position) if find_embedding else None
            if found is None:
                chunk.tokens.append(token)
                chunk.weights.append(run.weight)
                position += 1
                continue
            name, name_tokens, vector_count = found
            if vector_count > CHUNK_TOKENS:
                raise ValueError(f"embedding {name!r} has {vector_count} vectors; at most {CHUNK_TOKENS} fit in one chunk")
            if len(chunk.tokens) + vector_count > CHUNK_TOKENS:
                close()
            chunk.fixes.append((len(chunk.tokens), name))
            chunk.tokens.extend([PLACEHOLDER_TOKEN] * vector_count)
            chunk.weights.extend([run.weight] * vector_count)
            position += name_tokens
    if chunk.tokens or not chunks:
        close()
    return chunks


def frame_chunk(chunk: PromptChunk, *, bos: int, eos: int, pad: int) -> tuple[list[int], list[float]]:
    """77 ids and weights: BOS, the chunk, EOS, then padding (weights of framing tokens are 1)."""
    padding = CHUNK_TOKENS - len(chunk.tokens)
    ids = [bos] + chunk.tokens + [eos] + [pad] * padding
    weights = [1.0] + chunk.weights + [1.0] + [1.0] * padding
    return ids, weights
