"""A half-precision VAE whose decode overflows decodes that image again in float32 (A1111's "Automatically revert
VAE to 32-bit floats", diffusers' `force_upcast`), never a black image, and is left in its own dtype."""

from __future__ import annotations

import copy
import logging

import numpy as np
import torch
from diffusers import AutoencoderKL

from pipelines.vae_decode import decode_latents


def _tiny_vae() -> AutoencoderKL:
    torch.manual_seed(0)
    return AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                         up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(8, 16), latent_channels=4,
                         norm_num_groups=4, layers_per_block=1).eval()


def _overflow_in_half(module, inputs, output):
    return torch.full_like(output, float("inf")) if output.dtype == torch.float16 else output


def test_an_overflowing_half_precision_decode_is_redone_in_float32(caplog):
    reference = _tiny_vae()
    half = copy.deepcopy(reference).to(torch.float16)
    half.decoder.conv_out.register_forward_hook(_overflow_in_half)
    latents = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(1))
    with caplog.at_level(logging.WARNING, logger="pipelines.vae_decode"):
        images = decode_latents(half, latents)
    expected = decode_latents(reference, latents.to(torch.float16).float())  # the same fp16-rounded latents
    for image, wanted in zip(images, expected):
        assert np.abs(np.asarray(image, dtype=int) - np.asarray(wanted, dtype=int)).max() <= 1
    assert sum("decoding this image again in float32" in r.getMessage() for r in caplog.records) == 2
    assert half.dtype == torch.float16


def test_a_finite_half_precision_decode_is_kept(caplog):
    half = _tiny_vae().to(torch.float16)
    with caplog.at_level(logging.WARNING, logger="pipelines.vae_decode"):
        decode_latents(half, torch.zeros(1, 4, 8, 8))
    assert not caplog.records
