"""IP-Adapter attention masks: where in the picture each reference image acts (one on the left, another on the right).

diffusers' `IPAdapterAttnProcessor2_0` takes `cross_attention_kwargs={"ip_adapter_masks": [...]}`, one entry per
adapter, a `[1, images, H, W]` tensor or None; a masked adapter attends to each of its images separately and adds
each result weighted by that image's mask, downsampled (bicubic) to every attention layer's resolution. mixkit
checks the masks once (count per adapter image, the output's aspect ratio), keeps grayscale as weights in [0, 1]
(diffusers' `IPAdapterMaskProcessor` binarizes at 0.5 by default; a black/white mask is the same either way, a
soft edge blends), and resizes them to each sampling pass's latent size so hires passes use them too.
"""

from __future__ import annotations

from typing import Any

from pipelines.ip_adapter_entries import entries_per_adapter, is_pil_image

# Relative aspect-ratio difference tolerated between a mask and the output: 1% is a rounding of the size to the
# 8-pixel latent grid; more would stretch the region the user drew.
ASPECT_TOLERANCE = 0.01


def check_ip_adapter_masks(value: Any, image_counts: tuple[int, ...]) -> tuple:
    """Per adapter one "L" mask per reference image, or None (the adapter acts on the whole picture).

    `value`: None; or per adapter None, one PIL mask (an adapter with one image) or a list of masks, one per image;
    with a single adapter one mask or a flat list of its masks."""
    adapters = len(image_counts)
    if value is None:
        return (None,) * adapters
    entries = entries_per_adapter(value, adapters)
    if entries is None:
        raise TypeError(f"ip_adapter_mask must be a PIL image or a list (one entry per IP-Adapter, each None, a mask "
                        f"or a list of masks), got {type(value).__name__}.")
    if len(entries) != adapters:
        raise ValueError(f"ip_adapter_mask has {len(entries)} entries for {adapters} IP-Adapters; give one entry "
                         "per adapter (None for an adapter acting on the whole picture).")
    masks = []
    for index, (entry, count) in enumerate(zip(entries, image_counts)):
        if entry is None:
            masks.append(None)
            continue
        group = list(entry) if isinstance(entry, (list, tuple)) else [entry]
        if not all(is_pil_image(mask) for mask in group):
            raise TypeError(f"ip_adapter_mask entry {index} must be None, a PIL image or a list of PIL images.")
        if len(group) != count:
            raise ValueError(f"ip_adapter_mask entry {index} has {len(group)} masks for the {count} reference "
                             f"images of IP-Adapter {index}; give one mask per image (in the same order).")
        masks.append(tuple(mask.convert("L") for mask in group))
    return tuple(masks)


def check_mask_aspect(masks: tuple, width: int, height: int, frame: str = "output") -> None:
    """Refuse a mask whose aspect ratio is not the `frame`'s, `width` x `height` (stretching it would move the region
    drawn); a hires fix's frame is its first pass."""
    for index, group in enumerate(masks):
        for mask in group or ():
            if abs(mask.width / mask.height - width / height) > ASPECT_TOLERANCE * (width / height):
                raise ValueError(f"ip_adapter_mask entry {index} is {mask.width}x{mask.height}, whose aspect ratio "
                                 f"is not the {frame}'s {width}x{height}; draw the mask at {width}x{height} (or any "
                                 "size of that shape).")


def mask_tensors(masks: tuple) -> list:
    """Per adapter a float `[1, images, H, W]` tensor of its masks in [0, 1], or None."""
    import numpy as np
    import torch

    tensors = []
    for group in masks:
        if group is None:
            tensors.append(None)
            continue
        size = group[0].size
        planes = [np.asarray(mask.resize(size) if mask.size != size else mask, dtype=np.float32) / 255.0
                  for mask in group]
        tensors.append(torch.from_numpy(np.stack(planes))[None])
    return tensors


def masks_at(tensors: list, height: int, width: int, device, cache: dict) -> list:
    """`tensors` resized to a latent of `height` x `width` (cached per size: a hires pass has its own)."""
    import torch.nn.functional as F

    key = (height, width, str(device))
    if key not in cache:
        cache[key] = [None if mask is None else
                      F.interpolate(mask, size=(height, width), mode="bilinear", antialias=True).clamp(0, 1).to(device)
                      for mask in tensors]
    return cache[key]


def hires_pass_masks(tensors: list, grid: tuple[int, int], crop: tuple[int, int, int, int]) -> list:
    """First-pass `tensors` in a hires fix's second-pass frame: stretched over the upscaled latent grid (`grid`,
    cells (width, height)) and cut as its latents are (`crop`, cells (left, top, right, bottom)), so a region stays
    where it was drawn when hr_resize_x and hr_resize_y crop the picture to another aspect ratio. Latent resolution
    is enough: diffusers resizes masks to each attention layer, none finer than the latent."""
    import torch.nn.functional as F

    (width, height), (left, top, right, bottom) = grid, crop
    return [None if mask is None else
            F.interpolate(mask, size=(height, width), mode="bilinear", antialias=True).clamp(0, 1)[
                :, :, top:bottom, left:right]
            for mask in tensors]
