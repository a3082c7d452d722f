"""Tiny TAESD folders (diffusers AutoencoderTiny from a config, random weights), named as on the hub."""

from __future__ import annotations

from pathlib import Path

import pytest


def build_tiny_taesd(folder: Path, seed: int = 0, latent_channels: int = 4) -> Path:
    import torch
    from diffusers import AutoencoderTiny

    torch.manual_seed(seed)
    # Three 2x upsamplings like the real TAESD (latents are 1/8 of the image), 8 channels wide.
    taesd = AutoencoderTiny(encoder_block_out_channels=(8, 8, 8, 8), decoder_block_out_channels=(8, 8, 8, 8),
                            num_encoder_blocks=(1, 1, 1, 1), num_decoder_blocks=(1, 1, 1, 1),
                            latent_channels=latent_channels).eval()
    taesd.save_pretrained(folder, safe_serialization=True)
    return folder


@pytest.fixture(scope="session")
def tiny_taesd_dir(tmp_path_factory):
    return build_tiny_taesd(tmp_path_factory.mktemp("hub") / "taesd", seed=3)


@pytest.fixture(scope="session")
def tiny_taesdxl_dir(tmp_path_factory):
    return build_tiny_taesd(tmp_path_factory.mktemp("hub") / "taesdxl", seed=4)
