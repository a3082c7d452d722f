"""A1111's "Interrogate DeepBooru": an image's Danbooru tags as prompt text, from the DeepDanbooru tagger.

The image is prepared as A1111's `tag_multi` does (RGB, "resize and fill" to 512x512, values 0..1) and scored by
`mixkit.interrogate.DeepbooruModel`; `mixkit.interrogate.format_tags` writes the answer under `DeepbooruSettings`.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from mixkit.interrogate.deepbooru import DeepbooruModel, shared_deepbooru_model
from mixkit.interrogate.deepbooru_network import INPUT_SIZE
from mixkit.interrogate.deepbooru_tags import DeepbooruSettings, format_tags


def deepbooru_pixels(image: Any) -> torch.Tensor:
    """[1, 3, 512, 512] floats in [0, 1] of a PIL image, as A1111 feeds its tagger.

    A1111 converts to RGB (alpha dropped, not composited), resizes with its img2img "resize and fill" (fit inside,
    edge rows or columns stretched into the bands) and divides the 8-bit values by 255."""
    from PIL import Image

    from pipelines.image_prep import resize_image

    if not isinstance(image, Image.Image):
        raise TypeError(f"DeepBooru tags a PIL image, got {type(image).__name__}.")
    if image.width < 1 or image.height < 1:
        raise ValueError(f"DeepBooru cannot tag an empty image ({image.width}x{image.height}).")
    resized = resize_image(image.convert("RGB"), INPUT_SIZE, INPUT_SIZE, "resize and fill")
    pixels = torch.frombuffer(bytearray(resized.tobytes()), dtype=torch.uint8).view(INPUT_SIZE, INPUT_SIZE, 3)
    return (pixels.permute(2, 0, 1).unsqueeze(0).float() / 255)


def interrogate_deepbooru(image: Any, settings: DeepbooruSettings | None = None, *,
                          model: DeepbooruModel | str | os.PathLike, keep_in_memory: bool = False) -> str:
    """A1111's DeepBooru text for one image ("1girl, solo, ..."), `settings` at A1111's defaults when None.

    `model`: a `DeepbooruModel` or the folder holding `model-resnet_custom_v3.pt` (the process's shared tagger of that
    folder, so `keep_in_memory=True` keeps it loaded for the next call). A missing file is a FileNotFoundError naming
    the folder and the download."""
    settings = DeepbooruSettings() if settings is None else settings
    if not isinstance(settings, DeepbooruSettings):
        raise TypeError(f"settings must be DeepbooruSettings, got {type(settings).__name__}.")
    tagger = model if isinstance(model, DeepbooruModel) else shared_deepbooru_model(model)
    pixels = deepbooru_pixels(image)
    tags, scores = tagger.probabilities(pixels, keep_in_memory=keep_in_memory)
    return format_tags(tags, scores, settings)
