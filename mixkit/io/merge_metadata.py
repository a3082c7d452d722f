"""What A1111's Checkpoint Merger writes besides the weights: the output file name and the safetensors metadata.

The default name says the recipe (`0.7(a) + 0.3(b)`, `a + 0.3(b - c)`, or A's name alone), with `.inpainting` /
`.instruct-pix2pix` appended when A's extra input channels were kept. The metadata (A1111 >= 1.5) copies the
sources' own metadata, adds the user's entries, marks `format: pt`, and records the recipe (`sd_merge_recipe`) and
every model that went into it, sources of sources included (`sd_merge_models`, keyed by full sha256 with the name
and the legacy 8-digit hash), so a merged file on Civitai can be traced back.
"""

from __future__ import annotations

import json

from mixkit.io.hashing import legacy_a1111_hash, sha256_file
from mixkit.io.merge_inputs import MergeSource
from mixkit.io.merge_math import ADD_DIFFERENCE, WEIGHTED_SUM


def default_merge_name(method: str, multiplier: float, primary: MergeSource, secondary: MergeSource | None,
                       tertiary: MergeSource | None) -> str:
    """A1111's file name (without suffixes) for a merge left unnamed."""
    if method == WEIGHTED_SUM:
        return f"{round(1 - multiplier, 2)}({primary.model_name}) + {round(multiplier, 2)}({secondary.model_name})"
    if method == ADD_DIFFERENCE:
        return f"{primary.model_name} + {round(multiplier, 2)}({secondary.model_name} - {tertiary.model_name})"
    return primary.model_name


def source_metadata(source: MergeSource) -> dict[str, str]:
    """A safetensors source's `__metadata__` (text as stored); pickled checkpoints carry none."""
    from mixkit.io.formats import detect_checkpoint_format
    from mixkit.io.safetensors_header import read_safetensors_metadata

    if detect_checkpoint_format(source.path) != "safetensors":
        return {}
    return read_safetensors_metadata(source.path)


def _json_entry(metadata: dict[str, str], key: str):
    """A metadata value A1111 stores as JSON text, parsed; None when missing or not valid JSON."""
    try:
        return json.loads(metadata[key])
    except (KeyError, ValueError):
        return None


def merged_models_entry(sources: list[MergeSource]) -> dict:
    """`sd_merge_models`: each source by sha256 (name, legacy hash, its own recipe), then the models it was merged
    from, as A1111's add_model_metadata."""
    models: dict = {}
    for source in sources:
        metadata = source_metadata(source)
        models[sha256_file(source.path)] = {"name": source.name, "legacy_hash": legacy_a1111_hash(source.path),
                                            "sd_merge_recipe": _json_entry(metadata, "sd_merge_recipe")}
        nested = _json_entry(metadata, "sd_merge_models")
        if isinstance(nested, dict):
            models.update(nested)
    return models


def merge_metadata(recipe: dict, sources: list[MergeSource], *, user_metadata: dict[str, str],
                   add_merge_recipe: bool, copy_metadata_fields: bool) -> dict[str, str]:
    """The `__metadata__` of a merged safetensors file when "Save metadata" is on, in A1111's order of precedence:
    the sources' metadata (A, then B, then C), the user's entries, `format`, then the recipe entries."""
    metadata: dict[str, str] = {}
    if copy_metadata_fields:
        for source in sources:
            metadata.update(source_metadata(source))
    metadata.update(user_metadata)
    metadata["format"] = "pt"
    if add_merge_recipe:
        metadata["sd_merge_recipe"] = json.dumps(recipe)
        metadata["sd_merge_models"] = json.dumps(merged_models_entry(sources))
    return metadata
