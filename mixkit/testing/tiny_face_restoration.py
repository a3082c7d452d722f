"""Stand-ins for face restoration tests: a RetinaFace whose detections are planted, restorer networks with a known
effect, and model folders laid out as A1111's. They exercise the whole restore path without real weights."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from mixkit.models.face.alignment import FFHQ_TEMPLATE_512
from mixkit.models.face.detection import prior_boxes
from mixkit.models.face.retinaface import RetinaFaceConfig


def template_landmarks(left: float, top: float, size: float) -> list[tuple[float, float]]:
    """The FFHQ template's five points scaled into a size×size square at (left, top): an upright face there."""
    return [(left + x * size / 512, top + y * size / 512) for x, y in FFHQ_TEMPLATE_512.tolist()]


class PlantedFaceDetector(nn.Module):
    """Looks like a RetinaFace to `detect_faces`; reports exactly `faces` = [(box, landmarks)] given as fractions of
    the image width/height, whatever size the image is scaled to, each with confidence sigmoid(10)."""

    def __init__(self, faces: list[tuple[tuple[float, ...], list[tuple[float, float]]]]):
        super().__init__()
        self.config = RetinaFaceConfig.mobilenet()
        self.faces = faces
        self.anchor = nn.Parameter(torch.zeros(1))  # gives the module a device and dtype
        self.calls = 0

    def forward(self, x: torch.Tensor):
        self.calls += 1
        priors = prior_boxes(self.config, *x.shape[-2:]).to(x.device)
        count = priors.shape[0]
        offsets, landmarks = torch.zeros(1, count, 4, device=x.device), torch.zeros(1, count, 10, device=x.device)
        logits = torch.tensor([10.0, -10.0], device=x.device).repeat(1, count, 1)
        for index, (box, points) in enumerate(self.faces):
            prior = priors[index]
            centre = torch.tensor([(box[0] + box[2]) / 2, (box[1] + box[3]) / 2], device=x.device)
            size = torch.tensor([box[2] - box[0], box[3] - box[1]], device=x.device)
            offsets[0, index, :2] = (centre - prior[:2]) / (0.1 * prior[2:])
            offsets[0, index, 2:] = torch.log(size / prior[2:]) / 0.2
            relative = torch.tensor(points, device=x.device)
            landmarks[0, index] = ((relative - prior[:2]) / (0.1 * prior[2:])).reshape(-1)
            logits[0, index] = torch.tensor([-10.0, 10.0])
        return offsets, logits, landmarks


def planted_detector_loader(faces_in_pixels: list[tuple[tuple[float, ...], list[tuple[float, float]]]],
                            width: int, height: int):
    """A `detector_loader` for `FaceRestorer` planting faces given in pixels of a width×height picture."""
    relative = [((b[0] / width, b[1] / height, b[2] / width, b[3] / height),
                 [(x / width, y / height) for x, y in points]) for b, points in faces_in_pixels]

    def load(path, device=None):
        load.paths.append(Path(path))
        return PlantedFaceDetector(relative).to(device or "cpu")

    load.paths = []
    return load


class StandInRestorer(nn.Module):
    """A restorer network with the contract of `mixkit.models.face_restorers`: [N,3,512,512] in [-1,1] → same.

    `fill=None` returns the input (identity), else a flat colour (RGB in [-1, 1]); records the weights it was given."""

    def __init__(self, fill: tuple[float, float, float] | None = None):
        super().__init__()
        self.fill = fill
        self.anchor = nn.Parameter(torch.zeros(1))
        self.weights: list = []

    def forward(self, x: torch.Tensor, weight=None) -> torch.Tensor:
        self.weights.append(weight)
        if self.fill is None:
            return x.clone()
        return torch.tensor(self.fill, dtype=x.dtype, device=x.device).view(1, 3, 1, 1).expand_as(x).clone()


def stand_in_loader(architecture: str, network: nn.Module | None = None):
    """A `loader` for `FaceRestorer` returning (architecture, network) and recording the files it was asked for."""
    network = network if network is not None else StandInRestorer()

    def load(path, device=None, dtype=None):
        load.paths.append(Path(path))
        return architecture, network.to(device or "cpu")

    load.paths = []
    load.network = network
    return load


def a1111_face_folders(root: str | Path) -> dict[str, Path]:
    """models/Codeformer and models/GFPGAN as A1111 fills them (placeholder bytes: the stand-in loaders read none),
    without facexlib's parsing_parsenet.pth, so faces are pasted under the square mask unless a test adds one."""
    root = Path(root)
    codeformer, gfpgan = root / "Codeformer", root / "GFPGAN"
    for folder, files in ((codeformer, ("codeformer-v0.1.0.pth", "detection_Resnet50_Final.pth")),
                          (gfpgan, ("GFPGANv1.4.pth", "detection_Resnet50_Final.pth"))):
        folder.mkdir(parents=True, exist_ok=True)
        for name in files:
            (folder / name).write_bytes(b"stand-in")
    return {"CodeFormer": codeformer, "GFPGAN": gfpgan}


def face_picture(width: int = 96, height: int = 80, seed: int = 0):
    """A smooth seeded RGB picture (so a pasted face shows against it) and one face planted at its centre-left."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    base = rng.uniform(40, 200, 3).astype(np.float32)
    array = np.stack([base[0] + 0.3 * xs, base[1] + 0.2 * ys, base[2] - 0.1 * (xs + ys)], -1)
    picture = Image.fromarray(np.clip(array, 0, 255).round().astype(np.uint8))
    size = min(width, height) * 0.6
    left, top = width * 0.1, (height - size) / 2
    face = ((left, top, left + size, top + size), template_landmarks(left, top, size))
    return picture, [face]
