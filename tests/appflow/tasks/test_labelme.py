"""LabelMe documents from detections: layout, and masks that decode back to the input."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import torch
from PIL import Image

from appflow.tasks.labelme import labelme_annotation


def test_shapes_carry_label_box_score_and_a_mask_cropped_to_the_box():
    masks = torch.zeros(2, 20, 30, dtype=torch.bool)
    masks[0, 2:6, 3:9] = True
    masks[1, 10:20, 0:30] = True
    boxes = torch.tensor([[3.0, 2.0, 9.0, 6.0], [0.0, 10.0, 30.0, 20.0]])
    document = labelme_annotation((30, 20), ["dog", "grass"], boxes, masks, torch.tensor([0.9, 0.5]), "in.png")
    json.dumps(document)  # serialisable as is
    assert (document["imageWidth"], document["imageHeight"], document["imagePath"]) == (30, 20, "in.png")
    assert document["imageData"] is None
    first, second = document["shapes"]
    # the box's first and last pixel (a box ending at 9.0 ends on pixel 8), as LabelMe stores mask shapes
    assert first["label"] == "dog" and first["points"] == [[3, 2], [8, 5]]
    assert second["points"] == [[0, 10], [29, 19]]
    assert first["shape_type"] == "mask" and first["description"] == "score=0.9000"
    decoded = np.asarray(Image.open(io.BytesIO(base64.b64decode(first["mask"]))).convert("L")) > 0
    assert decoded.shape == (4, 6) and decoded.all()
    decoded = np.asarray(Image.open(io.BytesIO(base64.b64decode(second["mask"]))).convert("L")) > 0
    assert decoded.shape == (10, 30) and decoded.all()


def test_without_masks_shapes_are_rectangles_and_no_detections_is_an_empty_list():
    document = labelme_annotation((8, 8), ["a"], torch.tensor([[1.0, 1.0, 4.0, 5.0]]))
    assert document["shapes"][0]["shape_type"] == "rectangle" and document["shapes"][0]["mask"] is None
    empty = labelme_annotation((8, 8), [], torch.zeros(0, 4), torch.zeros(0, 8, 8, dtype=torch.bool))
    assert empty["shapes"] == []


def labelme_reads_mask_shape(shape: dict, image_size: tuple[int, int]) -> np.ndarray:
    """LabelMe 5.x's reading rule for a "mask" shape (labelme/utils/shape.py, used by labelme_export_json), restated:
    `(x1, y1), (x2, y2) = np.asarray(points).astype(int)`; `mask[y1:y2 + 1, x1:x2 + 1] = shape["mask"]`."""
    width, height = image_size
    full = np.zeros((height, width), dtype=bool)
    (x1, y1), (x2, y2) = np.asarray(shape["points"]).astype(int)
    crop = np.asarray(Image.open(io.BytesIO(base64.b64decode(shape["mask"]))).convert("L")) > 0
    full[y1:y2 + 1, x1:x2 + 1] = crop  # a crop of the wrong size raises here, as in LabelMe
    return full


def test_labelme_reads_back_every_mask_inside_its_box_for_fractional_and_edge_boxes():
    """Grounding DINO's boxes are fractional; before, the crop was one pixel short of what LabelMe pastes back
    ("could not broadcast input array from shape (8,10) into shape (9,10)")."""
    generator = torch.Generator().manual_seed(0)
    masks = torch.rand(4, 40, 48, generator=generator) > 0.5
    boxes = torch.tensor([[19.2, 29.33, 28.8, 37.33], [0.0, 0.0, 48.0, 40.0], [5.5, 6.5, 5.9, 6.9],
                          [40.1, 30.0, 47.99, 39.999]])
    document = labelme_annotation((48, 40), ["a", "b", "c", "d"], boxes, masks)
    for shape, mask, box in zip(document["shapes"], masks, boxes.tolist()):
        assert all(isinstance(v, int) for point in shape["points"] for v in point)
        read = labelme_reads_mask_shape(shape, (48, 40))
        (x1, y1), (x2, y2) = shape["points"]
        inside = np.zeros((40, 48), dtype=bool)
        inside[y1:y2 + 1, x1:x2 + 1] = True
        assert np.array_equal(read, mask.numpy() & inside)
    # every pixel the box touches: 19.2..28.8 is pixels 19..28; the whole image is 0..47 x 0..39
    assert document["shapes"][0]["points"] == [[19, 29], [28, 37]]
    assert document["shapes"][1]["points"] == [[0, 0], [47, 39]]
    assert document["shapes"][2]["points"] == [[5, 6], [5, 6]]  # a sub-pixel box is its one pixel
