"""Load a Stable Diffusion model from a diffusers folder, a Hugging Face id or a single file.

Components are loaded one by one with diffusers'/transformers' own classes (so real checkpoints
load exactly as those libraries load them) instead of through `DiffusionPipeline`, which would
also load safety checkers and feature extractors mixkit does not use, and would hide which
component failed.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from mixkit.errors import ModelNotFoundError
from mixkit.models.diffusion.components import DiffusionModel
from mixkit.models.diffusion.family import ModelFamily, detect_family
from mixkit.models.diffusion.recommended import read_recommended

logger = logging.getLogger(__name__)

SINGLE_FILE_SUFFIXES = (".safetensors", ".ckpt", ".pt", ".pth", ".bin")


def load_diffusion_model(source: str | os.PathLike, *, dtype=None, device: str | None = None,
                         vae: str | os.PathLike | None = None, attention: str = "auto",
                         config_dir: str | os.PathLike | None = None, unet_dtype=None) -> DiffusionModel:
    """Load SD 1.x / 2.x / SDXL base from `source` and report which family it is.

    `source` is a local diffusers folder, a single `.safetensors`/`.ckpt` file (original LDM/SGM
    layout, as shared on Civitai), or a Hugging Face id (`org/name`), which is looked up in the
    hub cache and respects `HF_HUB_OFFLINE`. `vae` optionally overrides the model's VAE with a
    diffusers VAE folder or a single-file VAE. `config_dir` (single files only) is a diffusers folder
    whose configs replace the shipped SD 1.x/2.x/XL ones (see `load_single_file`).

    `attention="auto"` routes the UNet's, VAE's and text encoders' attention through
    `mixkit.attention` (kernel chosen per call site, switchable with `set_attention_backend`);
    `attention="diffusers"` keeps diffusers'/transformers' own processors. What was switched is
    kept in `extras["attention"]`.

    `unet_dtype` (default: `dtype`) loads the UNet in another dtype than the text encoders and VAE (the
    fast preset's bfloat16 UNet next to float32 ones), so the UNet is never held in float32 first.

    Loading aims at one copy of the weights in memory: single files are read memory-mapped
    (safetensors) into modules built on the meta device and assigned in place; diffusers folders
    load with `low_cpu_mem_usage=True` (meta init, no random-init copy); `benchmarks/load_memory.py`
    measures the peak against a naive load.
    """
    import torch

    from mixkit.attention.install import check_attention_mode, install_attention

    check_attention_mode(attention)  # an unknown name fails before anything is read
    dtype = dtype or torch.float32
    if unet_dtype is not None and not (isinstance(unet_dtype, torch.dtype) and unet_dtype.is_floating_point):
        raise TypeError(f"unet_dtype must be a floating torch.dtype (torch.bfloat16, ...) or None, got {unet_dtype!r}")
    path = _resolve(source)
    if config_dir is not None and not path.is_file():
        raise ValueError(f"config_dir={str(config_dir)!r} only applies to single-file checkpoints; {path} is a folder "
                         "with its own configs: drop config_dir")
    if path.is_file():
        from mixkit.models.diffusion.single_file import load_single_file

        model = load_single_file(path, torch_dtype=dtype, config_dir=config_dir, unet_dtype=unet_dtype)
    else:
        model = _load_folder(path, str(source), dtype, unet_dtype or dtype)
    if vae is not None:
        model.vae = load_vae(vae, dtype=dtype, like=model.vae.config)
        model.extras["vae_name"] = Path(str(vae)).stem
        if Path(str(vae)).is_file():
            from mixkit.io.hashing import a1111_model_hash

            model.extras["vae_hash"] = a1111_model_hash(vae)
    if device is not None:
        move_model(model, device)
    parts = [("unet", model.unet), ("vae", model.vae)]
    parts += [(f"text_encoder{'_' + str(i + 1) if i else ''}", e) for i, e in enumerate(model.text_encoders)]
    model.extras["attention"] = install_attention(parts, attention).summary()
    logger.info("Loaded %s from %s", model.description, source)
    return model


def move_model(model: DiffusionModel, device) -> None:
    for module in [model.unet, model.vae, *model.text_encoders]:
        module.to(device)


def load_vae(source: str | os.PathLike, *, dtype=None, like=None):
    """A VAE from a diffusers VAE folder (with or without a `vae/` subfolder) or a single file.

    A single file does not record its latent scaling factor (SD 1.x 0.18215, SDXL 0.13025), so
    `like` (the config of the VAE it replaces) supplies the architecture and scaling.
    """
    import torch
    from diffusers import AutoencoderKL

    dtype = dtype or torch.float32
    path = _resolve(source)
    if path.is_file():
        from mixkit.models.diffusion.single_file import load_single_file_vae

        return load_single_file_vae(path, torch_dtype=dtype, vae_config=dict(like) if like is not None else None)
    subfolder = "vae" if (path / "vae" / "config.json").is_file() else None
    if not (path / (subfolder or "") / "config.json").is_file():
        raise ModelNotFoundError(f"{path} is not a VAE folder: it has no config.json (nor vae/config.json).")
    return AutoencoderKL.from_pretrained(path, subfolder=subfolder, torch_dtype=dtype).eval()


def _resolve(source: str | os.PathLike) -> Path:
    if not isinstance(source, (str, os.PathLike)) or not str(source).strip():
        raise ValueError(f"A model source must be a path or a Hugging Face id, got {source!r}.")
    path = Path(source).expanduser()
    if path.exists():
        return path
    from mixkit.io.sources import resolve_model_source

    return resolve_model_source(source)


def _load_folder(folder: Path, source: str, dtype, unet_dtype) -> DiffusionModel:
    from diffusers import AutoencoderKL, UNet2DConditionModel

    index_file = folder / "model_index.json"
    if not index_file.is_file():
        hint = " (it looks like a transformers model, not a diffusion model)" if (folder / "config.json").is_file() else ""
        raise ModelNotFoundError(
            f"{folder} is not a diffusers model folder: model_index.json is missing{hint}. "
            "Pass a Stable Diffusion folder saved with save_pretrained, a single .safetensors checkpoint, or a hub id."
        )
    index = json.loads(index_file.read_text(encoding="utf-8"))
    for part in ("unet", "vae", "text_encoder", "tokenizer", "scheduler"):
        if part not in index or not (folder / part).is_dir():
            raise ModelNotFoundError(f"{folder} is missing the '{part}' component of a Stable Diffusion model.")
    # low_cpu_mem_usage: modules built on the meta device, then given the file's tensors, instead of a
    # random init plus a copy (2x the weights at peak). It is diffusers' default only when accelerate
    # is installed, so it is asked for explicitly.
    unet = UNet2DConditionModel.from_pretrained(folder, subfolder="unet", torch_dtype=unet_dtype,
                                                low_cpu_mem_usage=True).eval()
    vae = AutoencoderKL.from_pretrained(folder, subfolder="vae", torch_dtype=dtype, low_cpu_mem_usage=True).eval()
    has_second = "text_encoder_2" in index and (folder / "text_encoder_2").is_dir()
    family = detect_family(unet.config, has_second)
    text_encoders = [_load_text_encoder(folder / "text_encoder", dtype)]
    tokenizers = [_load_tokenizer(folder / "tokenizer")]
    if family is ModelFamily.SDXL:
        text_encoders.append(_load_text_encoder(folder / "text_encoder_2", dtype))
        tokenizer_2 = folder / "tokenizer_2"
        tokenizers.append(_load_tokenizer(tokenizer_2 if tokenizer_2.is_dir() else folder / "tokenizer"))
    scheduler_config = _read_scheduler_config(folder / "scheduler")
    return DiffusionModel(
        unet=unet, vae=vae, text_encoders=text_encoders, tokenizers=tokenizers, scheduler_config=scheduler_config,
        family=family, name=folder.name, source=source, model_hash=_folder_hash(folder / "unet"),
        recommended=read_recommended(folder),
    )


def _load_text_encoder(folder: Path, dtype):
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    architectures = config.get("architectures") or ["CLIPTextModel"]
    cls = CLIPTextModelWithProjection if "CLIPTextModelWithProjection" in architectures else CLIPTextModel
    return cls.from_pretrained(folder, torch_dtype=dtype).eval()


def _load_tokenizer(folder: Path):
    from transformers import CLIPTokenizer

    return CLIPTokenizer.from_pretrained(folder)


def _read_scheduler_config(folder: Path) -> dict:
    config_file = folder / "scheduler_config.json"
    if not config_file.is_file():
        raise ModelNotFoundError(f"{folder} has no scheduler_config.json.")
    config = json.loads(config_file.read_text(encoding="utf-8"))
    return {k: v for k, v in config.items() if not k.startswith("_")}


def _folder_hash(unet_folder: Path) -> str | None:
    """A1111-style hash of the UNet weights: a diffusers folder has no single checkpoint file to hash."""
    weights = sorted(unet_folder.glob("*.safetensors")) or sorted(unet_folder.glob("*.bin"))
    if len(weights) != 1:
        return None
    from mixkit.io.hashing import a1111_model_hash

    return a1111_model_hash(weights[0])
