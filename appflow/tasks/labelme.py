"""LabelMe-style annotations from detections and masks (the `auto_label` app's file output).

The layout follows LabelMe 5.x JSON: one shape per detection; with a mask the shape is of type
"mask" (its two points are the box corners and `mask` is a base64 PNG of the mask cropped to the
box), otherwise a "rectangle". `imageData` is left null, so the file stays small and points at
`imagePath`.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from appflow.task import Port, Task, register_task

LABELME_VERSION = "5.5.0"


def mask_png_base64(mask) -> str:
    """A bool (h, w) tensor as a base64 1-bit PNG."""
    from PIL import Image

    image = Image.fromarray(mask.numpy().astype("uint8") * 255).convert("1")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def labelme_annotation(image_size: tuple[int, int], labels: list[str], boxes, seg_masks=None, scores=None,
                       image_path: str = "") -> dict[str, Any]:
    """A LabelMe document for an image of `image_size` (width, height); masks are (N, H, W) bools."""
    width, height = image_size
    shapes = []
    for index, (label, box) in enumerate(zip(labels, boxes.tolist())):
        x0, y0, x1, y1 = box
        shape: dict[str, Any] = {"label": label, "points": [[x0, y0], [x1, y1]], "group_id": None,
                                 "description": "" if scores is None else f"score={float(scores[index]):.4f}",
                                 "shape_type": "rectangle", "flags": {}, "mask": None}
        if seg_masks is not None and len(seg_masks) > index:
            left, top = int(x0), int(y0)
            right, bottom = max(left + 1, int(round(x1))), max(top + 1, int(round(y1)))
            shape["shape_type"] = "mask"
            shape["mask"] = mask_png_base64(seg_masks[index, top:bottom, left:right])
        shapes.append(shape)
    return {"version": LABELME_VERSION, "flags": {}, "shapes": shapes, "imagePath": image_path, "imageData": None,
            "imageHeight": height, "imageWidth": width}


@register_task
class LabelmeAnnotationTask(Task):
    """Turn labels, boxes and masks into a LabelMe JSON document."""

    name = "labelme_annotation"
    description = "detections + masks -> LabelMe JSON"
    inputs = {"image": Port("image"), "labels": Port("texts"), "boxes": Port("boxes"), "seg_masks": Port("masks"),
              "scores": Port("scores", optional=True)}
    outputs = {"annotation": "json"}
    main_output = "annotation"
    options = {"image_path": ""}

    def run(self, models, options, *, image, labels, boxes, seg_masks, scores=None) -> dict[str, Any]:
        if not (len(labels) == len(boxes) == len(seg_masks)):
            raise ValueError(f"labelme_annotation needs one label, box and mask per detection; got {len(labels)} "
                             f"labels, {len(boxes)} boxes, {len(seg_masks)} masks.")
        return {"annotation": labelme_annotation(image.size, labels, boxes, seg_masks, scores, str(options["image_path"]))}
