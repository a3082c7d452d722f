"""A unit's effective region mask: where in the picture its control applies (sd-webui-controlnet 1.1.4xx).

The extension (`ControlParams.apply_effective_region_mask` in scripts/hook.py) multiplies each of the unit's
residuals, after its weight (or soft-injection scale), by the mask's first channel / 255 resized bilinearly
(torch's default, corners not aligned) to that residual's height and width. The mask is taken at its own size: it
is not fitted to the generation size with the unit's resize mode, so a mask of another aspect ratio is stretched,
as there. Every row (prompt and negative) is masked alike; a white area keeps the control, a black one removes it.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def region_mask_tensor(mask) -> Any:
    """[1, 1, H, W] float32 in [0, 1]: the mask's first channel (a PIL image, white = control applies) / 255."""
    import torch

    channel = np.asarray(mask.convert("RGB"))[..., 0].astype(np.float32) / 255.0
    return torch.from_numpy(np.ascontiguousarray(channel))[None, None]


def apply_region_mask(residual, mask):
    """The residual [B, C, h, w] times the mask resized bilinearly to h x w."""
    import torch

    resized = torch.nn.functional.interpolate(mask.to(device=residual.device, dtype=torch.float32),
                                              size=tuple(residual.shape[-2:]), mode="bilinear")
    return residual * resized.to(residual.dtype)


def check_region_mask(label: str, mask: Any) -> None:
    from PIL import Image

    if mask is not None and not isinstance(mask, Image.Image):
        raise TypeError(f"{label}: effective_region_mask must be a PIL image (white = the control applies there) or "
                        f"None, got {type(mask).__name__}.")
