"""Mask plumbing between segmentation and inpainting."""

from __future__ import annotations

from typing import Any

from appflow.option_specs import OptionSpec
from appflow.task import Port, Task, check_int_option, register_task

DILATE = OptionSpec("int", 0, 256, 1, label="Grow the mask by (pixels)")


def union_mask_image(masks, dilate: int = 0):
    """White where any mask is set, as an 'L' image; `dilate` grows it by that many pixels so the
    inpainting also repaints the object's outline (SAM masks hug the object tightly)."""
    import torch
    from PIL import Image

    union = masks.any(dim=0) if len(masks) else torch.zeros(masks.shape[1:], dtype=torch.bool)
    if dilate > 0:
        kernel = 2 * dilate + 1
        union = torch.nn.functional.max_pool2d(union[None, None].float(), kernel, stride=1, padding=dilate)[0, 0] > 0
    return Image.fromarray(union.to(torch.uint8).mul(255).numpy())  # 2-D uint8 -> mode "L"


@register_task
class MergeMasksTask(Task):
    """The union of all masks as one black/white mask image (white = repaint)."""

    name = "merge_masks"
    description = "union of masks -> inpainting mask"
    inputs = {"seg_masks": Port("masks")}
    outputs = {"mask": "image"}
    main_output = "mask"
    options = {"dilate": 4}
    option_specs = {"dilate": DILATE}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        check_int_option("dilate (pixels)", options["dilate"], DILATE.low, DILATE.high)

    def run(self, models, options, *, seg_masks) -> dict[str, Any]:
        return {"mask": union_mask_image(seg_masks, options["dilate"])}
