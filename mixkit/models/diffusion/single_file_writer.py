"""Export a loaded model as one A1111/ComfyUI-style single-file checkpoint (LDM/SGM key layout).

The same function, run on empty (meta) modules, also tells the loader which keys and shapes a
file must contain for a given set of configs, so writer and loader cannot drift apart.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from mixkit.models.diffusion.family import ModelFamily
from mixkit.models.diffusion.ldm_layout import unet_to_ldm, vae_to_ldm
from mixkit.models.diffusion.single_file_clip import (
    CLIP_PREFIX_SD1,
    CLIP_PREFIX_SDXL,
    OPEN_CLIP_PREFIX_SD2,
    OPEN_CLIP_PREFIX_SDXL,
    OPEN_CLIP_PREFIX_SDXL_REFINER,
    clip_to_ldm,
    open_clip_to_ldm,
)
from mixkit.models.diffusion.detect_keys import V_PRED_MARKER, ZTSNR_MARKER

UNET_PREFIX = "model.diffusion_model."
VAE_PREFIX = "first_stage_model."


def text_encoders_to_ldm(text_encoders: list, family: ModelFamily) -> dict[str, torch.Tensor]:
    """The text encoder(s) under the family's LDM prefixes (CLIP-L as-is, OpenCLIP fused)."""
    expected = 2 if family is ModelFamily.SDXL else 1
    if len(text_encoders) != expected:
        raise ValueError(f"{family.label} has {expected} text encoder(s), got {len(text_encoders)}")
    if family is ModelFamily.SD1:
        return clip_to_ldm(text_encoders[0], CLIP_PREFIX_SD1)
    if family is ModelFamily.SD2:
        return open_clip_to_ldm(text_encoders[0], OPEN_CLIP_PREFIX_SD2)
    if family is ModelFamily.SDXL_REFINER:
        return open_clip_to_ldm(text_encoders[0], OPEN_CLIP_PREFIX_SDXL_REFINER)
    return {**clip_to_ldm(text_encoders[0], CLIP_PREFIX_SDXL), **open_clip_to_ldm(text_encoders[1], OPEN_CLIP_PREFIX_SDXL)}


def ldm_state_dict(unet, vae, text_encoders: list, family: ModelFamily) -> dict[str, torch.Tensor]:
    """All weights of a model in the single-file layout (works on meta modules: keys and shapes)."""
    state = {**unet_to_ldm(unet, UNET_PREFIX), **text_encoders_to_ldm(text_encoders, family)}
    if vae is not None:
        state.update(vae_to_ldm(vae, VAE_PREFIX))
    return state


def save_ldm_checkpoint(model, path: str | os.PathLike, *, dtype: torch.dtype | None = None) -> Path:
    """Write `model` (a DiffusionModel) as a single `.safetensors` file in the A1111 layout.

    v-prediction models get ComfyUI's `v_pred` marker tensor, so A1111-style loaders that honour
    it (ComfyUI, mixkit) pick the right parameterization without a config file; a zero-terminal-SNR
    schedule (`rescale_betas_zero_snr`, e.g. from training with `zero_terminal_snr: true`) adds the
    `ztsnr` marker next to it, which ComfyUI, Forge and mixkit read back as that schedule. `dtype` (e.g.
    torch.float16) casts floating-point weights; None keeps them as they are.
    """
    from mixkit.io import save_safetensors

    family = getattr(model, "family", None)
    if not isinstance(family, ModelFamily):
        raise TypeError(f"model must be a mixkit DiffusionModel with a ModelFamily, got {type(model).__name__}")
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating torch.dtype such as torch.float16 or None, got {dtype!r}")
    path = Path(path)
    if path.suffix != ".safetensors":
        raise ValueError(f"single-file checkpoints are written as .safetensors; got {str(path)!r}")
    state = ldm_state_dict(model.unet, model.vae, model.text_encoders, family)
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    if model.prediction_type == "v_prediction":
        state[V_PRED_MARKER] = torch.tensor([])
        if model.scheduler_config.get("rescale_betas_zero_snr"):
            state[ZTSNR_MARKER] = torch.tensor([])
    save_safetensors(state, path, metadata={"format": "pt"})
    return path
