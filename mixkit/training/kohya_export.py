"""Write a trained LoRA as the file people share: kohya tensors, `.alpha` keys and `ss_*` metadata.

A1111's Additional Networks and Civitai read the `ss_*` keys (network module, dim, alpha, base
model, tag frequency) and identify files by `sshs_model_hash` / `sshs_legacy_hash`. kohya computes
both hashes over the file as serialised *before* the hash keys are added, so the tensor bytes (and
hence `sshs_model_hash`) match what `addnet_hash_safetensors` reports for the finished file.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import torch

from mixkit.io.saving import save_safetensors

BASE_MODEL_VERSIONS = {"sd1": "sd_v1", "sd2": "sd_v2", "sdxl": "sdxl_base_v1-0"}
KOHYA_LEGACY_OFFSET, KOHYA_LEGACY_LENGTH = 0x100000, 0x10000


def kohya_hashes(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> tuple[str, str]:
    """(sshs_model_hash, sshs_legacy_hash) of the file these tensors and metadata serialise to."""
    from safetensors.torch import save

    data = save(tensors, metadata)
    header_length = int.from_bytes(data[:8], "little")
    model_hash = hashlib.sha256(data[8 + header_length:]).hexdigest()
    legacy = hashlib.sha256(data[KOHYA_LEGACY_OFFSET:KOHYA_LEGACY_OFFSET + KOHYA_LEGACY_LENGTH]).hexdigest()[:8]
    return model_hash, legacy


def training_metadata(*, network: str, rank: int, alpha: float, conv_rank: int | None, conv_alpha: float | None,
                      family: str, train_text_encoder: bool, tag_frequency: dict, dataset_dirs: dict,
                      num_images: int, settings: dict, started_at: float, base_model_name: str) -> dict[str, str]:
    """kohya's `ss_*` keys (strings only, JSON for nested values)."""
    network_args = {"conv_dim": str(conv_rank), "conv_alpha": str(conv_alpha)} if network == "locon" else {}
    metadata = {
        "ss_network_module": "networks.lora",
        "ss_network_dim": str(rank),
        "ss_network_alpha": str(float(alpha)),
        "ss_network_args": json.dumps(network_args),
        "ss_base_model_version": BASE_MODEL_VERSIONS[family],
        "ss_v2": str(family == "sd2"),
        "ss_sd_model_name": base_model_name,
        "ss_network_train_unet_only": str(not train_text_encoder),
        "ss_tag_frequency": json.dumps(tag_frequency),
        "ss_dataset_dirs": json.dumps(dataset_dirs),
        "ss_num_train_images": str(num_images),
        "ss_training_started_at": str(started_at),
        "ss_training_finished_at": str(time.time()),
        "modelspec.architecture": {"sd1": "stable-diffusion-v1", "sd2": "stable-diffusion-v2",
                                   "sdxl": "stable-diffusion-xl-v1-base"}[family] + "/lora",
    }
    for key, value in settings.items():
        metadata[f"ss_{key}"] = "None" if value is None else str(value)
    return metadata


def save_kohya_lora(tensors: dict[str, torch.Tensor], path: str | Path, metadata: dict[str, str]) -> Path:
    """Add `sshs_*` hashes and save atomically; returns the path."""
    model_hash, legacy_hash = kohya_hashes(tensors, metadata)
    save_safetensors(tensors, path, {**metadata, "sshs_model_hash": model_hash, "sshs_legacy_hash": legacy_hash})
    return Path(path)
