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


def embeddings_response(library) -> dict[str, dict]:
    """`{"loaded": {name: ...}, "skipped": {}}` for an `EmbeddingLibrary` (or None = no folder).

    A file that cannot be read is left out and logged (A1111 does the same); it stays usable
    nowhere, and the prompt check names it if a prompt asks for it.
    """
    loaded: dict[str, dict] = {}
    if library is not None:
        for name in library.names():
            try:
                loaded[name] = describe_embedding(library.get(name))
            except (OSError, ValueError) as error:
                logger.warning("embedding %r skipped: %s", name, error)
    return {"loaded": loaded, "skipped": {}}
