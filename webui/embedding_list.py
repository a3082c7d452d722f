"""The embeddings of `--embeddings-dir` described the way A1111's `GET /sdapi/v1/embeddings` does.

A1111 reports `shape` as the width of one vector; for an SDXL embedding (clip_l + clip_g
tensors) it reports the sum of both widths (768 + 1280 = 2048), so clients that compare it
with the model's text-encoder width keep working. `step` / `sd_checkpoint` / `sd_checkpoint_name`
are the training metadata A1111's trainer saves in its `.pt` files; they are null when a file
lacks them (safetensors files, other trainers), as in A1111.
"""

from __future__ import annotations

import logging
from typing import Any

from mixkit.prompts.embeddings import encoder_widths as _widths
from mixkit.prompts.embeddings import fit_problem

logger = logging.getLogger(__name__)


def describe_embedding(embedding) -> dict[str, Any]:
    """One `loaded` entry: training metadata, summed vector width and vector count."""
    width = sum(int(matrix.shape[-1]) for matrix in embedding.vectors.values())
    return {"step": embedding.step, "sd_checkpoint": embedding.sd_checkpoint,
            "sd_checkpoint_name": embedding.sd_checkpoint_name, "shape": width, "vectors": embedding.num_vectors}


def encoder_widths(model) -> list[tuple[str, int]]:
    """(embedding key, vector width) per text encoder of a loaded `DiffusionModel`: [("", 768)] for SD 1.x,
    [("clip_l", 768), ("clip_g", 1280)] for SDXL: what `Embedding.vectors_for` checks a prompt's embedding against."""
    return _widths(model.text_encoders, model.family.uses_pooled_text)


def embeddings_response(library, model=None) -> dict[str, dict]:
    """`{"loaded": {name: ...}, "skipped": {name: ...}}` for an `EmbeddingLibrary` (or None = no folder).

    With the loaded `model`, an embedding whose vectors do not fit its text encoders is listed under
    `skipped`, as A1111 lists embeddings of another model family: a prompt naming it keeps it as plain text.
    A file that cannot be read is left out and logged by the library (A1111 does the same).
    """
    loaded: dict[str, dict] = {}
    skipped: dict[str, dict] = {}
    widths = encoder_widths(model) if model is not None else []
    if library is not None:
        for name in library.names():
            embedding = library.get(name)
            described = describe_embedding(embedding)
            if widths and fit_problem(embedding, widths) is not None:
                skipped[name] = described
            else:
                loaded[name] = described
    return {"loaded": loaded, "skipped": skipped}
