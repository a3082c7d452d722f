"""Modular VLM pixels equal transformers' BLIP image processor (square bicubic resize, CLIP statistics)."""

from __future__ import annotations

import torch

from mixkit.models.vlm.modular.image_processing import images_to_pixel_values
from mixkit.models.vlm.modular.task_config import CLIP_IMAGE_MEAN, CLIP_IMAGE_STD


def test_matches_blip_image_processor(photos):
    from transformers import BlipImageProcessor

    reference = BlipImageProcessor(size={"height": 24, "width": 24}, image_mean=list(CLIP_IMAGE_MEAN),
                                   image_std=list(CLIP_IMAGE_STD))
    images = photos + [photos[0].convert("L"), photos[1].convert("RGBA")]
    expected = reference(images, return_tensors="pt")["pixel_values"]
    got = images_to_pixel_values(images, 24, CLIP_IMAGE_MEAN, CLIP_IMAGE_STD)
    assert got.shape == (6, 3, 24, 24) and got.dtype == torch.float32
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


def test_normalisation_is_per_channel():
    from PIL import Image

    grey = Image.new("RGB", (5, 7), (51, 102, 255))
    pixels = images_to_pixel_values([grey], 4, (0.0, 0.5, 1.0), (0.2, 0.1, 1.0))
    torch.testing.assert_close(pixels[0, :, 0, 0], torch.tensor([1.0, -1.0, 0.0]), atol=1e-6, rtol=0)
