"""Warp a face onto facexlib's FFHQ 512×512 template and paste a restored face back, in torch.

`fit_similarity` is the least-squares similarity (rotation, uniform scale, shift) taking five landmarks onto the
template; facexlib asks OpenCV's `estimateAffinePartial2D` (LMEDS, robust) for the same transform — on five clean
landmarks the two agree. `warp_affine` samples like `cv2.warpAffine` (bilinear, constant border). `paste_mask` is
facexlib's mask without face parsing (`use_parse=False`): the inverse-warped face square, eroded by 2 px to drop the
bilinear seam, eroded again and Gaussian-blurred by a width that grows with the face (√area / 20).

Images here are float tensors [C, H, W] in 0..255; matrices are 2×3 in pixel coordinates (x right, y down).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# facexlib's "standard 5 landmarks for FFHQ faces with 512 x 512": left eye, right eye, nose, mouth left, mouth right.
FFHQ_TEMPLATE_512 = torch.tensor([[192.98138, 239.94708], [318.90277, 240.1936], [256.63416, 314.01935],
                                  [201.26117, 371.41043], [313.08905, 371.15118]], dtype=torch.float64)
# facexlib fills outside the picture with BGR (135, 133, 132): a grey the restorers saw in training.
ALIGN_BORDER_RGB = (132.0, 133.0, 135.0)


def fit_similarity(source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The 2×3 similarity matrix M minimising Σ |M·[s, 1] − t|² over point pairs ([K, 2] each, K ≥ 2)."""
    source, target = source.double(), target.double()
    if source.shape != target.shape or source.ndim != 2 or source.shape[1] != 2 or source.shape[0] < 2:
        raise ValueError(f"fit_similarity needs two [K, 2] point sets with K >= 2; got {tuple(source.shape)} and "
                         f"{tuple(target.shape)}.")
    x, y = source.unbind(1)
    ones, zeros = torch.ones_like(x), torch.zeros_like(x)
    # Unknowns (a, b, tx, ty) of [[a, -b, tx], [b, a, ty]]: one row per coordinate of each point.
    rows = torch.cat([torch.stack([x, -y, ones, zeros], 1), torch.stack([y, x, zeros, ones], 1)])
    values = torch.cat([target[:, 0], target[:, 1]])[:, None]
    a, b, tx, ty = torch.linalg.lstsq(rows, values).solution[:, 0].tolist()
    return torch.tensor([[a, -b, tx], [b, a, ty]], dtype=torch.float64)


def invert_affine(matrix: torch.Tensor) -> torch.Tensor:
    """The 2×3 matrix undoing `matrix` (cv2.invertAffineTransform)."""
    full = torch.cat([matrix.double(), torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)])
    return torch.linalg.inv(full)[:2]


def warp_affine(image: torch.Tensor, matrix: torch.Tensor, size: tuple[int, int],
                border: tuple[float, ...] | float = 0.0) -> torch.Tensor:
    """`image` [C, H, W] moved by `matrix` (source → destination pixels) onto a `size` = (width, height) canvas.

    Bilinear; destination pixels whose source falls outside take `border` in proportion, as OpenCV's constant border.
    """
    channels, height, width = image.shape
    out_w, out_h = size
    inverse = invert_affine(matrix)
    ys, xs = torch.meshgrid(torch.arange(out_h, dtype=torch.float64), torch.arange(out_w, dtype=torch.float64),
                            indexing="ij")
    src_x = inverse[0, 0] * xs + inverse[0, 1] * ys + inverse[0, 2]
    src_y = inverse[1, 0] * xs + inverse[1, 1] * ys + inverse[1, 2]
    # align_corners=True maps -1/+1 to the centres of the first/last pixel, i.e. pixel index i ↦ 2i/(n−1) − 1.
    grid = torch.stack([src_x * 2 / max(width - 1, 1) - 1, src_y * 2 / max(height - 1, 1) - 1], -1)
    grid = grid[None].to(device=image.device, dtype=torch.float32)
    stacked = torch.cat([image.float(), torch.ones_like(image[:1], dtype=torch.float32)])[None]
    sampled = F.grid_sample(stacked, grid, mode="bilinear", padding_mode="zeros", align_corners=True)[0]
    values, coverage = sampled[:channels], sampled[channels:]
    fill = torch.as_tensor(border, dtype=torch.float32, device=image.device).reshape(-1, 1, 1)
    return values + (1 - coverage) * fill


def align_face(image: torch.Tensor, landmarks: torch.Tensor, *, size: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    """(face [3, size, size], image → face matrix) for one face's five landmarks [5, 2] in `image` pixels."""
    matrix = fit_similarity(landmarks, FFHQ_TEMPLATE_512 * (size / 512.0))
    return warp_affine(image, matrix, (size, size), ALIGN_BORDER_RGB), matrix


def _erode(mask: torch.Tensor, kernel: int) -> torch.Tensor:
    """Minimum over a kernel×kernel window anchored as cv2.erode (centre at kernel // 2); outside counts as 1."""
    if kernel <= 1:
        return mask
    before, after = kernel // 2, kernel - 1 - kernel // 2
    padded = F.pad(mask[None, None], (before, after, before, after), value=1.0)
    return -F.max_pool2d(-padded, kernel, stride=1)[0, 0]


# OpenCV does not compute sizes 3, 5 and 7 with sigma 0 from the formula: it uses these binomial-like tables.
_OPENCV_SMALL_KERNELS = {3: (0.25, 0.5, 0.25), 5: (0.0625, 0.25, 0.375, 0.25, 0.0625),
                         7: (0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125)}


def _gaussian_blur(mask: torch.Tensor, kernel: int, sigma: float = 0.0) -> torch.Tensor:
    """cv2.GaussianBlur(mask, (kernel, kernel), sigma): sigma ≤ 0 takes OpenCV's sigma for the size; reflect-101
    border; computed in `mask`'s dtype."""
    if kernel <= 1:
        return mask
    if sigma > 0:
        taps = torch.arange(kernel, dtype=torch.float64) - (kernel - 1) / 2
        weights = torch.exp(-taps ** 2 / (2 * sigma ** 2))
    elif kernel in _OPENCV_SMALL_KERNELS:
        weights = torch.tensor(_OPENCV_SMALL_KERNELS[kernel], dtype=torch.float64)
    else:
        sigma = 0.3 * ((kernel - 1) * 0.5 - 1) + 0.8
        taps = torch.arange(kernel, dtype=torch.float64) - (kernel - 1) / 2
        weights = torch.exp(-taps ** 2 / (2 * sigma ** 2))
    weights = (weights / weights.sum()).to(mask)
    half = kernel // 2
    pad_x, pad_y = min(half, mask.shape[1] - 1), min(half, mask.shape[0] - 1)
    out = F.pad(mask[None, None], (pad_x, pad_x, 0, 0), mode="reflect" if pad_x else "replicate")
    out = F.conv2d(out, weights.view(1, 1, 1, -1)[..., half - pad_x:half + pad_x + 1])
    out = F.pad(out, (0, 0, pad_y, pad_y), mode="reflect" if pad_y else "replicate")
    return F.conv2d(out, weights.view(1, 1, -1, 1)[..., half - pad_y:half + pad_y + 1, :])[0, 0]


def paste_mask(inverse: torch.Tensor, face_size: int, size: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(seam-free mask, soft blend mask), each [H, W] in 0..1, for a face pasted by `inverse` onto a `size` canvas."""
    square = torch.ones(1, face_size, face_size)
    warped = warp_affine(square, inverse, size)[0].clamp(0, 1)
    seam_free = _erode(warped, 2)
    edge = int(float(seam_free.sum()) ** 0.5) // 20
    soft = _gaussian_blur(_erode(seam_free, edge * 2), edge * 2 + 1)
    return seam_free, soft


def paste_face(image: torch.Tensor, face: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """`image` [3, H, W] with `face` [3, S, S] (aligned by `matrix`, image → face) blended back in place."""
    height, width = image.shape[1:]
    inverse = invert_affine(matrix)
    restored = warp_affine(face.float(), inverse, (width, height))
    seam_free, soft = paste_mask(inverse, face.shape[-1], (width, height))
    seam_free, soft = seam_free.to(image.device), soft.to(image.device)
    return soft * (seam_free * restored) + (1 - soft) * image.float()
