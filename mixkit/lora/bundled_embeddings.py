"""Textual-inversion embeddings bundled inside a LoRA file, as A1111 reads them (pivotal tuning).

A LoRA trained together with the vectors of its trigger word stores them next to its modules:
`bundle_emb.<word>.string_to_param.*` ([vectors, dim], SD 1.x/2.x) or `bundle_emb.<word>.clip_l` and
`.clip_g` (SDXL). While such a LoRA is applied, `<word>` in a prompt reads those vectors, exactly as
an embedding file named `<word>` would, unless the embeddings folder has a usable file of that name: A1111 then
keeps the folder's (`load_networks`: "Skip bundle embedding ... as it was already loaded from embeddings folder").
They are not scaled by the LoRA's strength (A1111 does not).
"""

from __future__ import annotations

import warnings
from pathlib import Path

from mixkit.errors import CheckpointFormatError

BUNDLE_PREFIX = "bundle_emb."


def split_bundled_embeddings(tensors: dict, source: Path) -> tuple[dict, dict]:
    """(embeddings by word, the remaining tensors) of a LoRA file's tensors."""
    from mixkit.prompts.embeddings import TextualInversion, embedding_vectors_from_data

    grouped: dict[str, dict] = {}
    rest = {}
    for key, tensor in tensors.items():
        if not key.startswith(BUNDLE_PREFIX):
            rest[key] = tensor
            continue
        word, _, part = key[len(BUNDLE_PREFIX):].partition(".")
        if not word or not part:
            raise CheckpointFormatError(f"{source}: bundled-embedding key {key!r} is not "
                                        "bundle_emb.<word>.string_to_param.<key> or bundle_emb.<word>.clip_l/clip_g")
        data = grouped.setdefault(word, {})
        if part.startswith("string_to_param."):
            data.setdefault("string_to_param", {})[part[len("string_to_param."):]] = tensor
        else:
            data[part] = tensor
    embeddings = {}
    for word, data in grouped.items():
        where = Path(f"{source}/{word}")  # A1111 names a bundled embedding <file>/<word> too
        embeddings[word] = TextualInversion(name=word, path=where, vectors=embedding_vectors_from_data(data, where))
    return embeddings, rest


def bundled_embedding_tensors(word: str, vectors: dict) -> dict:
    """The file keys for one word's vectors ({"": [n, dim]} or {"clip_l": ..., "clip_g": ...})."""
    if set(vectors) == {""}:
        return {f"{BUNDLE_PREFIX}{word}.string_to_param.*": vectors[""]}
    return {f"{BUNDLE_PREFIX}{word}.{key}": value for key, value in vectors.items()}


def library_with_bundled(library, bundled: dict, text_encoders: list, is_sdxl: bool):
    """A copy of the embeddings-folder `library` (an `EmbeddingLibrary` or None) plus the LoRAs' `bundled` words.

    A word the folder already serves to these text encoders keeps the folder's vectors, with a warning, as A1111's
    `load_networks` skips such a bundle; a folder file of another model family is no embedding here (its name is
    plain text), so the bundle serves that word, as in A1111, where only loaded embeddings are checked.
    """
    from mixkit.prompts.embeddings import EmbeddingLibrary

    combined = library.refreshed() if library is not None else EmbeddingLibrary()
    usable = set(combined.names_for(text_encoders, is_sdxl)) if library is not None else set()
    for word, embedding in bundled.items():
        if word in usable:
            warnings.warn(f"the vectors bundled for {word!r} in LoRA {embedding.path.parent} are not used: the embeddings "
                          f"folder's {combined.get(word).path} has that name and wins, as in A1111; remove or rename that "
                          "file to use the LoRA's vectors", UserWarning, stacklevel=2)
            continue
        combined.add(embedding)
    return combined
