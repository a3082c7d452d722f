"""A tiny instruct-pix2pix model: the tiny SD 1.x folder with an 8-channel UNet (latents + input-image latents).

Built from a config with a fixed seed like the other tiny models, so tests load it back through the public loaders
(as a diffusers folder, and as an A1111-layout single file written by `save_ldm_checkpoint`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

INSTRUCT_PIX2PIX_CHANNELS = 8


def build_tiny_instruct_pix2pix(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny SD 1.x instruct-pix2pix diffusers folder: `build_tiny_sd1`'s parts, its UNet rebuilt from the same
    config with 8 input channels and seeded weights (random: the image-channel weights are not zero, so the input
    image changes the prediction, as in a trained model)."""
    import torch
    from diffusers import UNet2DConditionModel

    from mixkit.testing.tiny_models import build_tiny_sd1

    folder = build_tiny_sd1(Path(folder), seed=seed)
    config = UNet2DConditionModel.load_config(folder / "unet")
    torch.manual_seed(seed + 7)
    unet = UNet2DConditionModel.from_config({**config, "in_channels": INSTRUCT_PIX2PIX_CHANNELS}).eval()
    shutil.rmtree(folder / "unet")
    unet.save_pretrained(folder / "unet", safe_serialization=True)
    return folder
