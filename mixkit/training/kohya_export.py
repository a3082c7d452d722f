"""Write a trained LoRA as the file people share: kohya tensors, `.alpha` keys and `ss_*` metadata.

A1111's Additional Networks and Civitai read the `ss_*` keys (network module, dim, alpha, base
model, tag frequency) and identify files by `sshs_model_hash` / `sshs_legacy_hash`. kohya computes
both hashes over the tensors serialised with the `ss_*` keys only, *before* the hash keys are added,
so the tensor bytes (and hence `sshs_model_hash`) match what `addnet_hash_safetensors` reports for the
finished file, and the legacy hash is the one kohya would store for the same tensors and settings.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import torch

from mixkit.io.saving import save_safetensors
from mixkit.registry import Registry
from mixkit.training.lycoris_presets import LYCORIS_PRESETS, NETWORK_PRESETS

BASE_MODEL_VERSIONS = {"sd1": "sd_v1", "sd2": "sd_v2", "sdxl": "sdxl_base_v1-0"}
KOHYA_LEGACY_OFFSET, KOHYA_LEGACY_LENGTH = 0x100000, 0x10000

# How SDXL UNet module names are written. SD 1.x/2.x files always use the diffusers layout, as kohya does.
SDXL_KEY_LAYOUTS: Registry[str] = Registry("SDXL LoRA key layout")
SDXL_KEY_LAYOUTS.register("sgm", "lora_unet_input_blocks_4_1_... (kohya sdxl_train_network; A1111, ComfyUI, Civitai)")
SDXL_KEY_LAYOUTS.register("diffusers", "lora_unet_down_blocks_1_attentions_0_... (diffusers paths, flattened)")


def kohya_hashes(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> tuple[str, str]:
    """(sshs_model_hash, sshs_legacy_hash) as kohya's `precalculate_safetensors_hashes` computes them: over the
    file these tensors and only the `ss_*` metadata serialise to. kohya keeps only the training keys because
    they are meant to be immutable, so a tool that edits other keys (modelspec, a title) leaves the hashes valid;
    the legacy hash reads bytes 0x100000.. of that serialisation, which the header's length moves."""
    from safetensors.torch import save

    data = save(tensors, {key: value for key, value in metadata.items() if key.startswith("ss_")})
    header_length = int.from_bytes(data[:8], "little")
    model_hash = hashlib.sha256(data[8 + header_length:]).hexdigest()
    legacy = hashlib.sha256(data[KOHYA_LEGACY_OFFSET:KOHYA_LEGACY_OFFSET + KOHYA_LEGACY_LENGTH]).hexdigest()[:8]
    return model_hash, legacy


def training_metadata(*, network: str, rank: int, alpha: float, conv_rank: int | None, conv_alpha: float | None,
                      family: str, train_text_encoder: bool, tag_frequency: dict, dataset_dirs: dict,
                      num_images: int, settings: dict, started_at: float, base_model_name: str,
                      extra_network_args: dict | None = None, reg_dataset_dirs: dict | None = None,
                      dora_wd: bool = False, lycoris_preset: str | None = None) -> dict[str, str]:
    """kohya's `ss_*` keys (strings only, JSON for nested values); `extra_network_args` (like rank_dropout) join
    `ss_network_args` as kohya's --network_args do. `num_images` is kohya's `ss_num_train_images`: training samples
    per epoch, repeats included, class images not; `ss_num_reg_images` is the class images times their folders'
    repeats, before they are balanced against the training images (as kohya counts both). `settings` become
    `ss_<key>` with kohya's key names (`text_encoder_lr`, `optimizer`, `bucket_info` as JSON...). `dora_wd` (a DoRA
    run) and `lycoris_preset` (a LyCORIS layer preset) write LyCORIS's network module and network_args, with its
    algo and preset, as kohya records a LyCORIS run's --network_args; `conv_rank` None: no 3x3 convolution adapted
    (written conv_dim=0 under a preset that would adapt them)."""
    lycoris = dora_wd or lycoris_preset is not None
    network_args = {"conv_dim": str(conv_rank), "conv_alpha": str(conv_alpha)} if conv_rank else {}
    if not conv_rank and lycoris_preset is not None and LYCORIS_PRESETS.get(lycoris_preset).convs:
        # A preset run without 3x3 convolutions (LyCORIS's conv_dim=0) must say so: without the entry LyCORIS takes
        # conv_dim = network_dim, and the file would read as one that adapts every 3x3 convolution.
        network_args = {"conv_dim": "0"}
    network_args.update({key: str(value) for key, value in (extra_network_args or {}).items()})
    if lycoris:
        # kohya's networks.lora has no DoRA: kohya users train it through LyCORIS (`--network_module lycoris.kohya
        # --network_args "algo=lora" "dora_wd=True"`), so the file says so, with LyCORIS's spellings. A run on
        # mixkit's own layers names the LyCORIS preset that builds exactly those (`NETWORK_PRESETS`: attn-mlp, or a
        # preset file mixkit ships), as LyCORIS's default preset (full) would read as other layers.
        network_args = {"algo": "locon" if network == "locon" else "lora",
                        "preset": lycoris_preset or NETWORK_PRESETS[network],
                        **network_args, **({"dora_wd": "True"} if dora_wd else {})}
    metadata = {
        "ss_network_module": "lycoris.kohya" if lycoris else "networks.lora",
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
        "ss_reg_dataset_dirs": json.dumps(reg_dataset_dirs or {}),
        "ss_num_reg_images": str(sum(d["img_count"] * d["n_repeats"] for d in (reg_dataset_dirs or {}).values())),
        "ss_training_started_at": str(started_at),
        "ss_training_finished_at": str(time.time()),
    }
    for key, value in settings.items():
        metadata[f"ss_{key}"] = "None" if value is None else str(value)
    return metadata


def kohya_rate_settings(*, learning_rate: float, unet_lr: float | None, text_encoder_lr: float | None,
                        relative_step_adafactor: bool) -> dict:
    """kohya's `ss_learning_rate`, `ss_unet_lr`, `ss_text_encoder_lr` (and `ss_lr_scheduler` where it changes it),
    without the prefix. train_network.py records the options as given, not the rates the parts train at: a run with
    learning_rate alone writes ss_unet_lr None. Adafactor picking its own step size (relative_step, kohya's default
    for it) makes kohya's get_optimizer set args.learning_rate and args.unet_lr to None and args.lr_scheduler to
    "adafactor:<learning_rate>" before the metadata is written; the text-encoder rate survives, as kohya reads it
    into a local variable first."""
    if relative_step_adafactor:
        return {"learning_rate": None, "unet_lr": None, "text_encoder_lr": text_encoder_lr,
                "lr_scheduler": f"adafactor:{learning_rate}"}
    return {"learning_rate": learning_rate, "unet_lr": unet_lr, "text_encoder_lr": text_encoder_lr}


def base_model_file_metadata(model_source) -> dict[str, str]:
    """What kohya's train_network.py records of a single-file base model: its file name as `ss_sd_model_name`
    (extension included), A1111's old 8-digit model hash as `ss_sd_model_hash` and the file's SHA-256 as
    `ss_new_sd_model_hash`, by which A1111's and Civitai's training-info views name the checkpoint a LoRA was
    trained on. Empty for a diffusers folder or a hub id, which have no one file to hash (kohya writes
    "IsADirectory" for a folder; leaving the keys out tells a reader the same without a value that is no hash)."""
    from mixkit.io.hashing import legacy_a1111_hash, sha256_file

    path = Path(str(model_source))
    if not path.is_file():
        return {}
    return {"ss_sd_model_name": path.name, "ss_sd_model_hash": legacy_a1111_hash(path),
            "ss_new_sd_model_hash": sha256_file(path)}


# kohya's SS_METADATA_MINIMUM_KEYS: what --no_metadata still writes, so loaders can apply the network at all.
MINIMUM_METADATA_KEYS = ("ss_v2", "ss_base_model_version", "ss_network_module", "ss_network_dim", "ss_network_alpha",
                         "ss_network_args")


def minimum_metadata(metadata: dict[str, str]) -> dict[str, str]:
    """What kohya's --no_metadata keeps: the network's shape and base model (`MINIMUM_METADATA_KEYS`) and SAI's
    `modelspec.*` block; no dataset, tags, settings, names or times."""
    return {key: value for key, value in metadata.items()
            if key in MINIMUM_METADATA_KEYS or key.startswith("modelspec.")}


def without_local_paths(settings: dict, path_keys: tuple[str, ...]) -> dict:
    """`settings` with each path among `path_keys` cut to its last part, as kohya records only basenames
    (ss_sd_model_name, ss_dataset_dirs): a shared file must not tell where on its author's disk things were."""
    return {key: (Path(value).name if key in path_keys and isinstance(value, str) and value else value)
            for key, value in settings.items()}


SAVE_PRECISIONS: Registry[str] = Registry("save precision")
SAVE_PRECISIONS.register("float", "float32 tensors (exact)")
SAVE_PRECISIONS.register("fp16", "float16 tensors: half the size, what most shared LoRA files hold")
SAVE_PRECISIONS.register("bf16", "bfloat16 tensors: half the size, float32's range")
SAVE_DTYPES = {"float": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def cast_for_saving(tensors: dict[str, torch.Tensor], precision: str) -> dict[str, torch.Tensor]:
    """The tensors in the file's precision ("float", "fp16", "bf16"); `.alpha` scalars stay float32, so a rank/alpha
    ratio such as 0.3 / 8 is written exactly whatever the weights' precision."""
    dtype = SAVE_DTYPES[precision]
    return {key: value if key.endswith(".alpha") or not value.is_floating_point() else value.to(dtype)
            for key, value in tensors.items()}


def save_kohya_lora(tensors: dict[str, torch.Tensor], path: str | Path, metadata: dict[str, str]) -> Path:
    """Add `sshs_*` hashes and save atomically; returns the path."""
    model_hash, legacy_hash = kohya_hashes(tensors, metadata)
    save_safetensors(tensors, path, {**metadata, "sshs_model_hash": model_hash, "sshs_legacy_hash": legacy_hash})
    return Path(path)


def sgm_lora_names(unet) -> dict[str, str]:
    """Map kohya diffusers-layout UNet module names to the SGM (original SDXL) layout kohya writes for SDXL.

    kohya's SDXL trainer builds its own UNet with Stability's module names, so its files (and those
    A1111, ComfyUI and Civitai expect) say `lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q`
    where the SD 1.x trainer says `lora_unet_down_blocks_1_attentions_0_...`. Underscores are ambiguous,
    so the map is generated from the model's own module paths rather than by editing names.
    """
    from mixkit.lora.model_index import ldm_block_prefixes, ldm_name

    prefixes = ldm_block_prefixes(unet)
    names = {}
    for path, _ in unet.named_modules():
        sgm = ldm_name(path, prefixes) if path else None
        if sgm is not None:
            names[f"lora_unet_{path.replace('.', '_')}"] = f"lora_unet_{sgm.replace('.', '_')}"
    return names


def to_sgm_layout(tensors: dict[str, torch.Tensor], unet) -> dict[str, torch.Tensor]:
    """Rename every `lora_unet_*` key to the SGM layout; text-encoder keys (`lora_te1_`/`lora_te2_`) keep theirs."""
    names = sgm_lora_names(unet)
    renamed = {}
    for key, tensor in tensors.items():
        module, _, suffix = key.partition(".")
        if module.startswith("lora_unet_"):
            if module not in names:
                raise ValueError(f"LoRA module {module!r} has no SGM (original SDXL) name in this UNet; "
                                 "save with sdxl_key_layout='diffusers' instead.")
            module = names[module]
        renamed[f"{module}.{suffix}"] = tensor
    return renamed
