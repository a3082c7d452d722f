"""The embeddings of `--embeddings-dir` described the way A1111's `GET /sdapi/v1/embeddings` does.

A1111 reports `shape` as the width of one vector; for an SDXL embedding (clip_l + clip_g
tensors) it reports the sum of both widths (768 + 1280 = 2048), so clients that compare it
with the model's text-encoder width keep working. `step` / `sd_checkpoint` /
`sd_checkpoint_name` come from training metadata that mixkit does not read; A1111 sends null
when a file lacks them, and so do we.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def describe_embedding(embedding) -> dict[str, Any]:
    """One `loaded` entry: training metadata (null here), summed vector width and vector count."""
    width = sum(int(matrix.shape[-1]) for matrix in embedding.vectors.values())
    return {"step": None, "sd_checkpoint": None, "sd_checkpoint_name": None, "shape": width,
            "vectors": embedding.num_vectors}


def encoder_widths(model) -> list[tuple[str, int]]:
    """(embedding key, vector width) per text encoder of a loaded `DiffusionModel`: [("", 768)] for SD 1.x,
    [("clip_l", 768), ("clip_g", 1280)] for SDXL: what `Embedding.vectors_for` checks a prompt's embedding against."""
    sdxl = model.family.value == "sdxl"
    keys = ("clip_l", "clip_g") if sdxl else ("",)
    return [(key, encoder.get_input_embeddings().embedding_dim) for key, encoder in zip(keys, model.text_encoders)]


def embeddings_response(library, model=None) -> dict[str, dict]:
    """`{"loaded": {name: ...}, "skipped": {name: ...}}` for an `EmbeddingLibrary` (or None = no folder).

    With the loaded `model`, an embedding whose vectors do not fit its text encoders is listed under
    `skipped`, as A1111 lists embeddings of another model family: a prompt naming it would be refused.
    A file that cannot be read is left out and logged (A1111 does the same).
    """
    loaded: dict[str, dict] = {}
    skipped: dict[str, dict] = {}
    widths = encoder_widths(model) if model is not None else []
    kind = "SDXL" if len(widths) == 2 else "SD1/SD2"
    if library is not None:
        for name in library.names():
            try:
                embedding = library.get(name)
                described = describe_embedding(embedding)
            except (OSError, ValueError) as error:
                logger.warning("embedding %r skipped: %s", name, error)
                continue
            try:
                for key, width in widths:
                    embedding.vectors_for(key, width, kind)
            except ValueError:
                skipped[name] = described
                continue
            loaded[name] = described
    return {"loaded": loaded, "skipped": skipped}
