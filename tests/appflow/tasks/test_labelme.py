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
    assert first["label"] == "dog" and first["points"] == [[3.0, 2.0], [9.0, 6.0]]
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
