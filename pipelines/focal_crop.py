"""A1111's "Auto focal point crop" Extras step: resize to cover the target, then crop around the picture's subject.

As A1111's modules/textual_inversion/autocrop.py: the image is resized so it covers the target (A1111: landscape by
height, portrait by width, a square by the target's longer side, which leaves black bars in the crop when the target
is more elongated than the picture; here always the smallest covering size, `cover_size`), three kinds of points of
interest are found (faces, the most "entropic" target-sized window, OpenCV's good features to track), each kind's
centroid weighted by its slider (the weights of the kinds that found something normalised to sum 1), and the crop is
centred on the weighted average, pushed back inside the picture. "Create debug image" adds the resized picture with
the points, their weights and the crop drawn on it.

Faces: A1111 runs OpenCV's YuNet (downloaded on first use) or, offline, OpenCV's haar cascades. Neither is available
here (no downloads; opencv-python-headless 5 ships no cascade files), so faces come from mixkit's RetinaFace (the
detector of Restore faces, `face_finder_from_restorers`) when a face restorer folder is configured, each box counted as
A1111 counts a YuNet box (its centre across, a third down from its top); with no detector, faces find nothing and the
face weight drops out of the normalisation, as it does in A1111 when no face is found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

DEFAULT_FACE_WEIGHT = 0.9  # A1111's "Focal point face weight"
DEFAULT_ENTROPY_WEIGHT = 0.15  # "Focal point entropy weight"
DEFAULT_EDGES_WEIGHT = 0.5  # "Focal point edges weight"
ENTROPY_STEP = 4  # A1111 slides its entropy window 4 pixels at a time
GREEN, BLUE, RED, YELLOW = "#0F0", "#00F", "#F00", "#ff0"  # A1111's debug colours

FaceFinder = Callable[[object], Sequence[tuple[float, float, float, float]]]  # PIL image -> boxes (x1, y1, x2, y2)


@dataclass(frozen=True)
class Point:
    """A point of interest in the resized picture, with its share of its kind's weight."""

    x: float
    y: float
    weight: float = 1.0


@dataclass(frozen=True)
class FocalWeights:
    """The three sliders, each in [0, 1] (A1111's defaults)."""

    face: float = DEFAULT_FACE_WEIGHT
    entropy: float = DEFAULT_ENTROPY_WEIGHT
    edges: float = DEFAULT_EDGES_WEIGHT

    def checked(self) -> "FocalWeights":
        for name in ("face", "entropy", "edges"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"focal point {name} weight must be in [0, 1] (A1111's slider), got {value!r}.")
        return self


def cover_size(width: int, height: int, crop_width: int, crop_height: int) -> tuple[int, int]:
    """The size a width x height picture is resized to before cropping crop_width x crop_height from it: the
    smallest that covers the target, which is A1111's size wherever A1111's covers it.

    A1111 scales a landscape picture to the target's height and a portrait one to its width; for a target of the
    same orientation but more elongated (a 3:2 picture, a 4:1 target) that is narrower than the target, and
    `int(side * scale)` can fall a pixel short (49 x 50 for 512 x 512 gave 511 wide): the crop then held black
    columns. The larger of the two scales always covers, and the matched side is never rounded below the target."""
    scale = max(crop_width / width, crop_height / height)
    return max(crop_width, int(width * scale)), max(crop_height, int(height * scale))


def check_cover_size(width: int, height: int, crop_width: int, crop_height: int) -> tuple[int, int]:
    """`cover_size`, refused (ValueError) above the pixels an Extras image may have (`UpscaleLimits.max_pixels`): a
    picture far from the target's aspect ratio (a 1 x 4000 strip for 512 x 512) would be resized to billions of
    pixels, which took the process's memory (killed) where A1111 does the same."""
    from pipelines.upscale import UpscaleLimits

    size = cover_size(width, height, crop_width, crop_height)
    budget = UpscaleLimits().max_pixels
    if size[0] * size[1] > budget:
        raise ValueError(f"Auto focal point crop: a {width}x{height} picture would be resized to {size[0]}x{size[1]} "
                         f"({size[0] * size[1]} pixels, over the {budget} an Extras image may have) to cover "
                         f"{crop_width}x{crop_height}; its aspect ratio is too far from the target's. Crop it nearer "
                         f"to {crop_width}:{crop_height} first.")
    return size


def crop_box(focus_x: int, focus_y: int, width: int, height: int, crop_width: int,
             crop_height: int) -> tuple[int, int, int, int]:
    """The crop centred on the focal point (half sizes truncated, as A1111), pushed back inside width x height."""
    left = focus_x - crop_width // 2
    left = 0 if left < 0 else (width - crop_width if left + crop_width > width else left)
    top = focus_y - crop_height // 2
    top = 0 if top < 0 else (height - crop_height if top + crop_height > height else top)
    return left, top, left + crop_width, top + crop_height


def centroid(points: Sequence[Point]) -> tuple[float, float]:
    return sum(p.x for p in points) / len(points), sum(p.y for p in points) / len(points)


def focal_point(kinds: Sequence[tuple[Sequence[Point], float]]) -> tuple[int, int]:
    """The weighted average of each non-empty kind's centroid, weights normalised over those kinds, rounded as
    Python rounds (A1111's `round`); (0, 0) when nothing was found or every weight is 0, as A1111."""
    found = [(centroid(points), weight) for points, weight in kinds if points]
    total = sum(weight for _, weight in found)
    if not found or total == 0:
        return 0, 0
    shares = [weight / total for _, weight in found]
    weight = sum(shares)
    x = sum(cx * share for ((cx, _), _), share in zip(found, shares))
    y = sum(cy * share for ((_, cy), _), share in zip(found, shares))
    return round(x / weight), round(y / weight)


def window_entropy(image) -> float:
    """A1111's 'entropy' of a window: over the black/white picture's occupied histogram bins, the sum of
    -log2(share) (not Shannon's weighted sum: a window mostly one colour with a few pixels of the other scores
    high)."""
    import numpy as np

    band = np.asarray(image.convert("1"), dtype=np.uint8)
    hist, _ = np.histogram(band, bins=range(0, 256))
    hist = hist[hist > 0]
    return float(-np.log2(hist / hist.sum()).sum())


def entropy_points(image, crop_width: int, crop_height: int) -> list[Point]:
    """The centre of the target-sized window (slid along the long axis in steps of 4 while its far edge stays inside)
    that A1111's entropy ranks highest; none for a square picture."""
    if image.width == image.height:
        return []
    along_x = image.width > image.height
    limit = image.width if along_x else image.height
    best, best_score, offset = (0, 0), 0.0, 0
    while (offset + (crop_width if along_x else crop_height)) < limit:
        box = (offset, 0, offset + crop_width, crop_height) if along_x else (0, offset, crop_width, offset + crop_height)
        score = window_entropy(image.crop(box))
        if score > best_score:
            best_score, best = score, box[:2]
        offset += ENTROPY_STEP
    return [Point(int(best[0] + crop_width / 2), int(best[1] + crop_height / 2))]


def edge_points(image) -> list[Point]:
    """OpenCV's good features to track (up to 100, quality 0.04, 6% of the short side apart) on the grey picture,
    its bottom tenth painted grey first (A1111's guard against watermarks)."""
    import cv2
    import numpy as np
    from PIL import ImageDraw

    grey = image.convert("L")
    ImageDraw.Draw(grey).rectangle([0, image.height * 0.9, image.width, image.height], fill="#999")
    found = cv2.goodFeaturesToTrack(np.array(grey), maxCorners=100, qualityLevel=0.04,
                                    minDistance=min(grey.width, grey.height) * 0.06, useHarrisDetector=False)
    if found is None:
        return []
    return [Point(float(x), float(y), 1 / len(found)) for x, y in (p.ravel() for p in found)]


def face_points(image, face_finder: FaceFinder | None) -> list[Point]:
    """Each face box as A1111 counts a YuNet face: its centre across, a third of its height down from its top."""
    if face_finder is None:
        return []
    boxes = list(face_finder(image))
    return [Point(int(x1 + (x2 - x1) * 0.5), int(y1 + (y2 - y1) * 0.33), 1 / len(boxes)) for x1, y1, x2, y2 in boxes]


def focal_crop(image, crop_width: int, crop_height: int, weights: FocalWeights = FocalWeights(), *,
               debug: bool = False, face_finder: FaceFinder | None = None) -> list:
    """[the crop] or, with `debug`, [the crop, the annotated resized picture] (A1111's "Create debug image")."""
    from PIL import ImageDraw

    weights = weights.checked()
    if crop_width < 1 or crop_height < 1:
        raise ValueError(f"The focal crop size must be positive, got {crop_width}x{crop_height}.")
    resized = image.resize(check_cover_size(image.width, image.height, crop_width, crop_height))
    kinds = [(edge_points(resized) if weights.edges > 0 else [], weights.edges, "Edge", BLUE),
             (entropy_points(resized, crop_width, crop_height) if weights.entropy > 0 else [], weights.entropy,
              "Entropy", YELLOW),
             (face_points(resized, face_finder) if weights.face > 0 else [], weights.face, "Face", RED)]
    focus = focal_point([(points, weight) for points, weight, _, _ in kinds])
    box = crop_box(*focus, resized.width, resized.height, crop_width, crop_height)
    results = [resized.crop(box)]
    if debug:
        annotated = resized.copy()
        draw = ImageDraw.Draw(annotated)
        radius = min(resized.width, resized.height) * 0.07
        total = sum(weight for points, weight, _, _ in kinds if points) or 1.0
        for points, weight, label, colour in kinds:
            if not points:
                continue
            cx, cy = centroid(points)
            share = weight / total
            half = radius * share // 2
            draw.text((cx - half, cy - half - 15), f"{label}: {share:.02f}", fill=colour)
            draw.ellipse([cx - half, cy - half, cx + half, cy + half], outline=colour)
            for point in points if len(points) > 1 else ():
                draw.rectangle([point.x - 2, point.y - 2, point.x + 2, point.y + 2], outline=colour)
        half = radius // 2
        draw.ellipse([focus[0] - half, focus[1] - half, focus[0] + half, focus[1] + half], outline=GREEN)
        draw.rectangle([box[0], box[1], box[2] - 1, box[3] - 1], outline=GREEN)
        results.append(annotated)
    return results


def face_finder_from_restorers(registry=None) -> FaceFinder | None:
    """A finder running the RetinaFace of the first registered face restorer whose folders hold it (facexlib's
    `detection_Resnet50_Final.pth`, as Restore faces uses), or None when no restorer folder is configured or none
    holds the detector."""
    from pipelines.face_restoration import FACE_RESTORERS
    from pipelines.face_restorer_files import detector_file

    registry = FACE_RESTORERS if registry is None else registry
    for name in registry.names():
        restorer = registry.get(name)
        try:
            path = detector_file(getattr(restorer, "detector_folders", []))
        except FileNotFoundError:
            continue
        return _retinaface_finder(path, getattr(restorer, "detector_loader", None), getattr(restorer, "device", None))
    return None


def _retinaface_finder(path, loader, device) -> FaceFinder:
    loaded = []

    def find(image):
        import numpy as np
        import torch

        from mixkit.models.face import detect_faces

        if not loaded:
            if loader is None:
                from mixkit.models.face import load_retinaface

                loaded.append(load_retinaface(path, device=device or "cpu"))
            else:
                loaded.append(loader(path, device=device))
        detector = loaded[0]
        with torch.inference_mode():
            where = next(detector.parameters()).device
            pixels = torch.from_numpy(np.asarray(image.convert("RGB"), dtype=np.float32).copy()).permute(2, 0, 1)
            return [face.box for face in detect_faces(detector, pixels.to(where))]

    return find
