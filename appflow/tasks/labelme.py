"""LabelMe-style annotations from detections and masks (the `auto_label` app's file output).

The layout follows LabelMe 5.x JSON: one shape per detection; with a mask the shape is of type
"mask" (its two points are the box's first and last pixel, integers, and `mask` is a base64 PNG
of the mask cropped to those pixels, ends included, as LabelMe reads it back), otherwise a
"rectangle". `imageData` is left null, so the file stays small and points at `imagePath`.
"""

from __future__ import annotations

import base64
import io
import os
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


def inclusive_pixel_box(box: list[float], width: int, height: int) -> tuple[int, int, int, int]:
    """The pixels (left, top, right, bottom), ends included, that a float x0, y0, x1, y1 box covers in the image.

    LabelMe stores a mask shape as its first and last pixel: its canvas writes `points=[(x1, y1), (x2, y2)]` with
    `mask=mask[y1:y2 + 1, x1:x2 + 1]`, and its readers (`labelme/utils/shape.py`, `labelme_export_json`) paste
    `shape["mask"]` back at `[y1:y2 + 1, x1:x2 + 1]` from `points.astype(int)`. Pixel i spans [i, i + 1), so a box
    ending at 28.8 (or exactly 29.0) ends on pixel 28.
    """
    import math

    x0, y0, x1, y1 = box
    left = min(max(int(math.floor(x0)), 0), width - 1)
    top = min(max(int(math.floor(y0)), 0), height - 1)
    right = min(max(int(math.ceil(x1)) - 1, left), width - 1)
    bottom = min(max(int(math.ceil(y1)) - 1, top), height - 1)
    return left, top, right, bottom


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
            left, top, right, bottom = inclusive_pixel_box(box, width, height)
            shape["shape_type"] = "mask"
            shape["points"] = [[left, top], [right, bottom]]
            shape["mask"] = mask_png_base64(seg_masks[index, top:bottom + 1, left:right + 1])
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
    options = {"image_path": ""}  # "": the image file's name when the image was given as a file

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        path = options["image_path"]
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"image_path must be a string or path (the document's imagePath, '' for none), "
                            f"got {type(path).__name__} {path!r}.")

    def run(self, models, options, *, image, labels, boxes, seg_masks, scores=None) -> dict[str, Any]:
        if not (len(labels) == len(boxes) == len(seg_masks)):
            raise ValueError(f"labelme_annotation needs one label, box and mask per detection; got {len(labels)} "
                             f"labels, {len(boxes)} boxes, {len(seg_masks)} masks.")
        # LabelMe opens the picture from imagePath (imageData is null), relative to the JSON file: an image given as a
        # file is named by its file name, for the JSON saved next to it as LabelMe saves it; "" left it unopenable.
        from appflow.image_inputs import SOURCE_PATH_KEY

        path = os.fspath(options["image_path"]) or os.path.basename(image.info.get(SOURCE_PATH_KEY, ""))
        return {"annotation": labelme_annotation(image.size, labels, boxes, seg_masks, scores, path)}
