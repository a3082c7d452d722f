"""Faces and their five landmarks in an image, by RetinaFace, decoded the way facexlib does for A1111.

Pure functions (`prior_boxes`, `decode_boxes`, `decode_landmarks`, `nms`) carry the math; `detect_faces` runs a
network on one picture with facexlib's pre-processing (BGR, minus the Caffe means 104/117/123, the short side scaled up
to 640 as `FaceRestoreHelper.get_face_landmarks_5(resize=640)` does) and thresholds (confidence 0.8, NMS IoU 0.4,
faces whose eyes are under 5 px apart dropped).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from mixkit.io.state_fit import check_state_fits
from mixkit.models.face.retinaface import RetinaFace, RetinaFaceConfig

_BGR_MEANS = (104.0, 117.0, 123.0)
# The scale-up to `short_side` stops at this many pixels. facexlib scales by short side alone, so a 2 x 2000 strip
# (a few bytes of PNG over HTTP) would become 640 x 640000 and need gigabytes; ordinary pictures never reach it.
MAX_UPSCALED_PIXELS = 2560 * 2560


@dataclass(frozen=True)
class DetectedFace:
    """One face in image pixels: box (x1, y1, x2, y2), confidence, landmarks [[x, y]] × 5 (eyes, nose, mouth)."""

    box: tuple[float, float, float, float]
    score: float
    landmarks: tuple[tuple[float, float], ...]


def prior_boxes(config: RetinaFaceConfig, height: int, width: int) -> torch.Tensor:
    """Anchors [P, 4] as (cx, cy, w, h) relative to the image, in the order of the heads' outputs.

    For each level: rows, then columns, then the level's anchor sizes, as facexlib's PriorBox.
    """
    levels = []
    for step, sizes in zip(config.steps, config.min_sizes):
        rows, cols = math.ceil(height / step), math.ceil(width / step)
        cy = (torch.arange(rows, dtype=torch.float64) + 0.5) * step / height
        cx = (torch.arange(cols, dtype=torch.float64) + 0.5) * step / width
        grid_y, grid_x = torch.meshgrid(cy, cx, indexing="ij")
        per_size = [torch.stack([grid_x, grid_y, torch.full_like(grid_x, size / width),
                                 torch.full_like(grid_x, size / height)], -1) for size in sizes]
        levels.append(torch.stack(per_size, 2).reshape(-1, 4))
    return torch.cat(levels).float()


def decode_boxes(offsets: torch.Tensor, priors: torch.Tensor, variance: tuple[float, float]) -> torch.Tensor:
    """Corner boxes [P, 4] (x1, y1, x2, y2, relative) from the box head's offsets against `priors` (SSD encoding)."""
    centres = priors[:, :2] + offsets[:, :2] * variance[0] * priors[:, 2:]
    sizes = priors[:, 2:] * torch.exp(offsets[:, 2:] * variance[1])
    return torch.cat([centres - sizes / 2, centres + sizes / 2], 1)


def decode_landmarks(offsets: torch.Tensor, priors: torch.Tensor, variance: tuple[float, float]) -> torch.Tensor:
    """Landmarks [P, 10] (x, y per point, relative) from the landmark head's offsets against `priors`."""
    points = offsets.reshape(-1, 5, 2) * variance[0] * priors[:, None, 2:] + priors[:, None, :2]
    return points.reshape(-1, 10)


def nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> list[int]:
    """Indices kept by greedy non-maximum suppression, highest score first.

    Areas count pixels inclusively (+1), as facexlib's py_cpu_nms, so results match it on pixel boxes.
    """
    x1, y1, x2, y2 = boxes.double().unbind(1)
    areas = (x2 - x1 + 1) * (y2 - y1 + 1)
    order = torch.argsort(scores, descending=True, stable=True)
    keep: list[int] = []
    while order.numel():
        best, rest = int(order[0]), order[1:]
        keep.append(best)
        inter_w = (torch.minimum(x2[best], x2[rest]) - torch.maximum(x1[best], x1[rest]) + 1).clamp(min=0)
        inter_h = (torch.minimum(y2[best], y2[rest]) - torch.maximum(y1[best], y1[rest]) + 1).clamp(min=0)
        inter = inter_w * inter_h
        order = rest[inter / (areas[best] + areas[rest] - inter) <= iou_threshold]
    return keep


@torch.no_grad()
def detect_faces(model: RetinaFace, image: torch.Tensor, *, confidence: float = 0.8, iou_threshold: float = 0.4,
                 short_side: int | None = 640, min_eye_distance: float = 5.0) -> list[DetectedFace]:
    """Faces in `image` ([3, H, W] RGB in 0..255), best first, in the image's pixel coordinates.

    The image is scaled up (never down) so its short side is `short_side`, as A1111 asks facexlib to, but not past
    `MAX_UPSCALED_PIXELS`; boxes and landmarks are mapped back. Faces with eyes closer than `min_eye_distance` px
    (side views, specks) are dropped.
    """
    if image.ndim != 3 or image.shape[0] != 3:
        raise ValueError(f"detect_faces takes one RGB image [3, H, W]; got shape {tuple(image.shape)}.")
    if not 0.0 <= confidence <= 1.0 or not 0.0 <= iou_threshold <= 1.0:
        raise ValueError(f"confidence {confidence} and iou_threshold {iou_threshold} must be in [0, 1].")
    parameter = next(model.parameters())
    height, width = image.shape[1:]
    scale = 1.0 if short_side is None else max(1.0, min(short_side / min(height, width),
                                                        math.sqrt(MAX_UPSCALED_PIXELS / (height * width))))
    bgr = image.flip(0).to(device=parameter.device, dtype=torch.float32)[None]
    if scale != 1.0:
        bgr = F.interpolate(bgr, size=(int(height * scale), int(width * scale)), mode="bilinear", align_corners=False)
    bgr = bgr - torch.tensor(_BGR_MEANS, device=bgr.device).view(1, 3, 1, 1)
    offsets, logits, landmark_offsets = model(bgr.to(parameter.dtype))
    scaled_h, scaled_w = bgr.shape[-2:]
    priors = prior_boxes(model.config, scaled_h, scaled_w).to(bgr.device)
    variance = model.config.variance
    boxes = decode_boxes(offsets[0].float(), priors, variance) * torch.tensor([scaled_w, scaled_h] * 2,
                                                                               device=bgr.device) / scale
    points = decode_landmarks(landmark_offsets[0].float(), priors, variance) * torch.tensor(
        [scaled_w, scaled_h] * 5, device=bgr.device) / scale
    scores = logits[0].float().softmax(-1)[:, 1]
    chosen = scores > confidence
    boxes, points, scores = boxes[chosen].cpu(), points[chosen].cpu(), scores[chosen].cpu()
    faces = []
    for index in nms(boxes, scores, iou_threshold):
        landmarks = points[index].reshape(5, 2)
        if float(torch.linalg.vector_norm(landmarks[0] - landmarks[1])) < min_eye_distance:
            continue
        faces.append(DetectedFace(tuple(float(v) for v in boxes[index]), float(scores[index]),
                                  tuple((float(x), float(y)) for x, y in landmarks)))
    return faces


def load_retinaface(path: str | os.PathLike, *, device: str | torch.device = "cpu",
                    dtype: torch.dtype = torch.float32) -> RetinaFace:
    """facexlib's detection_Resnet50_Final.pth (or detection_mobilenet0.25_Final.pth) as an eval-mode RetinaFace.

    The file is read weights-only; the backbone is told apart by its keys, and every tensor must fit.
    """
    from mixkit.errors import CheckpointFormatError
    from mixkit.io.loading import read_checkpoint
    from mixkit.io.tensor_checks import refuse_non_finite_tensors

    file = Path(path).expanduser()
    loaded = read_checkpoint(file)
    if isinstance(loaded, dict) and isinstance(loaded.get("state_dict"), dict):
        loaded = loaded["state_dict"]
    if not isinstance(loaded, dict):
        raise CheckpointFormatError(f"{str(file)!r} holds a {type(loaded).__name__}, not RetinaFace weights.")
    state = {(key[len("module."):] if key.startswith("module.") else key): value for key, value in loaded.items()
             if isinstance(key, str) and isinstance(value, torch.Tensor)}
    if "body.layer1.0.conv1.weight" in state:
        config = RetinaFaceConfig.resnet50()
    elif "body.stage1.0.0.weight" in state:
        config = RetinaFaceConfig.mobilenet()
    else:
        keys = ", ".join(list(state)[:5]) or "no tensors"
        raise CheckpointFormatError(
            f"{str(file)!r} is not a RetinaFace detector (its first keys: {keys}); expected facexlib's "
            "detection_Resnet50_Final.pth or detection_mobilenet0.25_Final.pth.")
    model = RetinaFace(config)
    expected = model.state_dict()
    check_state_fits(expected, state, file, f"RetinaFace {config.backbone}", optional_suffixes=("num_batches_tracked",))
    refuse_non_finite_tensors(file, state, "RetinaFace")  # NaN scores would find no face and change nothing, silently
    model.load_state_dict(state, strict=False)
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)
