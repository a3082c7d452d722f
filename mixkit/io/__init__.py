"""All checkpoint I/O: format detection, safe loading, atomic saving, hashing and model sources.

Every other module reads and writes weights through here, so the safety rules live in one place:
safetensors first, pickles only via `torch.load(weights_only=True)` with no unsafe retry, format
decided by content rather than extension, and saves that never leave a half-written file.
Importing this package does not import torch, safetensors or huggingface_hub; the functions do.
"""

from mixkit.io.atomic import CheckpointWriteError, atomic_output_path
from mixkit.io.checkpoint_merge import check_merge_request, merge_checkpoints
from mixkit.io.formats import CheckpointFormat, detect_checkpoint_format
from mixkit.io.hashing import (
    a1111_model_hash,
    addnet_hash_safetensors,
    addnet_sha256_safetensors,
    legacy_a1111_hash,
    model_hash_matches,
    sha256_file,
)
from mixkit.io.key_shapes import checkpoint_shapes
from mixkit.io.loading import check_pickle_is_safe, load_state_dict, read_checkpoint
from mixkit.io.safetensors_header import read_safetensors_header, read_safetensors_metadata
from mixkit.io.saving import save_safetensors
from mixkit.io.sources import resolve_model_source

__all__ = [
    "CheckpointFormat",
    "CheckpointWriteError",
    "a1111_model_hash",
    "addnet_hash_safetensors",
    "addnet_sha256_safetensors",
    "atomic_output_path",
    "check_merge_request",
    "check_pickle_is_safe",
    "checkpoint_shapes",
    "detect_checkpoint_format",
    "legacy_a1111_hash",
    "load_state_dict",
    "merge_checkpoints",
    "model_hash_matches",
    "read_checkpoint",
    "read_safetensors_header",
    "read_safetensors_metadata",
    "resolve_model_source",
    "save_safetensors",
    "sha256_file",
]
