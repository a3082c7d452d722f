"""A ControlNet unit's mask, used as sd-webui-controlnet uses it.

The extension joins a unit's picture and mask into one RGBA input (`ControlNetUnit.get_input_images_rgba`: the
mask's first channel is the alpha; a mask of another size than the picture is an error there, and here). Then:

- its inpaint modules (`inpaint`, shown as "inpaint_global_harmonious", and `inpaint_only`) keep the mask: the
  control image is the picture with the masked pixels at -1 (the hook's "ControlNet inpaint protocol",
  `c * (1 - m) - m` with m = mask > 0.5 once fitted), the input control_v11p_sd15_inpaint was trained on. A unit
  without picture in img2img takes the init image and the img2img inpaint mask as A1111 prepares it (inverted,
  blurred); a picture without mask has no masked pixel.
- any other module reads a mask that is not blank (first channel neither all <= 5 nor all >= 250) as a drawing on
  the canvas ("Canvas scribble mode. Using mask scribble as input."): the mask, grey, replaces the picture and goes
  through the unit's preprocessor. A blank mask, which the extension's UI and clients send with every unit, is
  ignored. (Its setting `controlnet_ignore_noninpaint_mask`, which ignores every such mask, has no counterpart.)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

# The extension's blank-mask rule (`from_rgba_to_input`): a first channel all <= 5 or all >= 250 is no drawing.
BLANK_MASK_LEVELS = (5, 250)


def mask_channel(mask) -> np.ndarray:
    """The mask's first channel (HxW uint8), what the extension takes as the alpha of the unit's RGBA input."""
    return np.ascontiguousarray(np.asarray(mask.convert("RGB"))[..., 0])


def is_blank_mask(channel: np.ndarray) -> bool:
    low, high = BLANK_MASK_LEVELS
    return bool((channel <= low).all() or (channel >= high).all())


def takes_mask(preprocessor: str) -> bool:
    """Whether the preprocessor makes its control from the picture and the mask (the inpaint modules)."""
    from pipelines.preprocessors import get_preprocessor

    return get_preprocessor(preprocessor).takes_mask


def check_unit_mask(label: str, image: Any, mask: Any) -> None:
    """Refuse a mask that is not a PIL image, a mask without picture and a mask of another size than the picture,
    naming the unit and the sizes (the extension fails on the last with 'image shape not aligned with mask shape')."""
    from PIL import Image

    if mask is None:
        return
    if not isinstance(mask, Image.Image):
        raise TypeError(f"{label}: mask must be a PIL image (white = masked) or None, got {type(mask).__name__}.")
    if image is None:
        raise ValueError(f"{label}: a mask needs the unit's own image (the mask marks pixels of that image); give "
                         "the unit an image, or send no mask (in img2img a unit without image uses the init image "
                         "and the img2img inpaint mask).")
    if mask.size != image.size:
        raise ValueError(f"{label}: the mask is {mask.width}x{mask.height} but the unit's image is "
                         f"{image.width}x{image.height}; they must have the same size (the mask marks the image's "
                         "pixels). Resize the mask to the image, as drawing on the image gives.")


def with_mask_resolved(unit):
    """The unit as its preprocessor uses the mask: unchanged for the inpaint modules; for any other, a drawn (not
    blank) mask becomes the picture, grey, and a blank one is dropped."""
    mask = getattr(unit, "mask", None)
    if mask is None or takes_mask(unit.preprocessor):
        return unit
    channel = mask_channel(mask)
    if is_blank_mask(channel):
        return replace(unit, mask=None)
    from PIL import Image

    return replace(unit, image=Image.fromarray(channel).convert("RGB"), mask=None)


def inpaint_control(colour: np.ndarray, mask: np.ndarray):
    """The control image of an inpaint unit, [1, 3, H, W] float32: the colour in [0, 1] where the mask is below half,
    -1 where it is above (the extension's `c * (1 - m) - m`, m = mask / 255 > 0.5)."""
    import torch

    c = torch.from_numpy(colour.astype(np.float32) / 255.0).permute(2, 0, 1)[None]
    m = torch.from_numpy((mask.astype(np.float32) / 255.0 > 0.5).astype(np.float32))[None, None]
    return (c * (1 - m) - m).contiguous()
