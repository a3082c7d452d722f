"""What a shared LoRA file tells about its run (hunt findings 6 and 7): no local paths, kohya's --no_metadata, and
sshs_legacy_hash computed as kohya's `precalculate_safetensors_hashes` does (over the `ss_*` keys only)."""

from __future__ import annotations

import hashlib
import json

import torch
from safetensors.torch import load_file, save

from mixkit.io import read_safetensors_metadata
from mixkit.training.kohya_export import kohya_hashes
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora


def kohya_reference_hashes(tensors: dict, metadata: dict) -> tuple[str, str]:
    """kohya's precalculate_safetensors_hashes, restated: keep the ss_* keys, serialise, then sd-webui-additional-
    networks' addnet_hash_safetensors (sha256 after the header) and addnet_hash_legacy (bytes 0x100000..+0x10000)."""
    data = save(tensors, {k: v for k, v in metadata.items() if k.startswith("ss_")})
    header = int.from_bytes(data[:8], "little")
    return hashlib.sha256(data[8 + header:]).hexdigest(), hashlib.sha256(data[0x100000:0x110000]).hexdigest()[:8]


def test_legacy_hash_covers_the_ss_keys_only():
    # 1.2 MB of tensor bytes, so the legacy window (from 1 MiB) reads tensor data that the header's length moves.
    tensors = {"lora_unet_x.lora_down.weight": torch.arange(300_000, dtype=torch.float32).reshape(300, 1000)}
    metadata = {"ss_network_dim": "32", "modelspec.title": "t" * 1000, "mixkit_training_config": "{" + "c" * 5000 + "}"}
    assert kohya_hashes(tensors, metadata) == kohya_reference_hashes(tensors, metadata)
    # Other keys may be edited later (titles, a tool's notes) without invalidating the hashes, as kohya intends.
    assert kohya_hashes(tensors, {**metadata, "modelspec.title": "x"}) == kohya_hashes(tensors, metadata)
    # An ss_* key does count: 64 more header bytes move the legacy window (the header is padded to 8 bytes).
    assert kohya_hashes(tensors, {**metadata, "ss_training_comment": "c" * 64})[1] != kohya_hashes(tensors, metadata)[1]


def _train(model, dataset, output, **overrides):
    config = SDLoraTrainingConfig(model=str(model), dataset=str(dataset), output=str(output), resolution=32,
                                  batch_size=3, max_steps=1, rank=32, alpha=16.0, seed=3, **overrides)
    return train_sd_lora(config).output


def test_the_file_names_no_local_folder_and_its_hashes_are_kohyas(tiny_sd1_dir, colour_dataset, tmp_path):
    output = _train(tiny_sd1_dir, colour_dataset, tmp_path / "out" / "shared.safetensors",
                    checkpoint_dir=str(tmp_path / "private" / "ckpt"), class_dataset=str(colour_dataset))
    metadata = read_safetensors_metadata(output)
    private = [str(tiny_sd1_dir.parent), str(colour_dataset.parent), str(tmp_path)]
    leaks = {key: value for key, value in metadata.items() if any(folder in value for folder in private)}
    assert leaks == {}
    config = json.loads(metadata["mixkit_training_config"])
    assert (config["model"], config["dataset"], config["class_dataset"], config["checkpoint_dir"], config["output"]) == (
        tiny_sd1_dir.name, colour_dataset.name, colour_dataset.name, "ckpt", "shared.safetensors")
    # A diffusers folder has no one file to hash: kohya's base-model hashes are left out (kohya writes "IsADirectory").
    assert "ss_sd_model_hash" not in metadata and "ss_new_sd_model_hash" not in metadata
    # The hunter's hashes.py: recompute from the stored tensors and ss_* keys.
    assert (metadata["sshs_model_hash"], metadata["sshs_legacy_hash"]) == kohya_reference_hashes(load_file(output),
                                                                                                  metadata)


def test_no_metadata_keeps_only_what_a_loader_needs(tiny_sd1_dir, colour_dataset, tmp_path):
    # kohya's --no_metadata saves SS_METADATA_MINIMUM_KEYS plus the SAI model spec (and save_weights adds the hashes).
    metadata = read_safetensors_metadata(_train(tiny_sd1_dir, colour_dataset, tmp_path / "bare.safetensors",
                                                no_metadata=True))
    assert sorted(k for k in metadata if not k.startswith("modelspec.")) == [
        "ss_base_model_version", "ss_network_alpha", "ss_network_args", "ss_network_dim", "ss_network_module", "ss_v2",
        "sshs_legacy_hash", "sshs_model_hash"]
    assert metadata["ss_network_dim"] == "32" and metadata["modelspec.architecture"] == "stable-diffusion-v1/lora"


def test_a_single_file_base_model_is_named_by_kohyas_two_hashes(tiny_sd1_dir, colour_dataset, tmp_path):
    """kohya's train_network.py writes the base checkpoint's A1111 old hash (64 KiB at 1 MiB, 8 hex digits) as
    ss_sd_model_hash and its SHA-256 as ss_new_sd_model_hash; A1111's and Civitai's training-info views read them."""
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint

    checkpoint = tmp_path / "base.safetensors"
    save_ldm_checkpoint(load_diffusion_model(tiny_sd1_dir), checkpoint)
    config = SDLoraTrainingConfig(model=str(checkpoint), dataset=str(colour_dataset), resolution=32, max_steps=1,
                                  output=str(tmp_path / "lora.safetensors"))
    # The tiny model's single file needs its configs (a real SD 1.5 file loads from model= alone).
    output = train_sd_lora(config, model=load_diffusion_model(checkpoint, config_dir=tiny_sd1_dir)).output
    metadata = read_safetensors_metadata(output)
    data = checkpoint.read_bytes()
    assert metadata["ss_sd_model_name"] == "base.safetensors"
    assert metadata["ss_sd_model_hash"] == hashlib.sha256(data[0x100000:0x110000]).hexdigest()[:8]
    assert metadata["ss_new_sd_model_hash"] == hashlib.sha256(data).hexdigest()
