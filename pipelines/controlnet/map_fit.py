"""Fitting a control map to the generation size as sd-webui-controlnet does (`detectmap_proc`).

A control map is not a photo: a segmentation map's colours are class labels, a canny map is one-pixel
binary edges. The extension therefore fits maps with its own `high_quality_resize`, not with A1111's
img2img resize (`pipelines.image_prep.resize_image`, which stays the resize of the init image itself):

- maps with 2 < colours < 200 (segmentation palettes) are resized with nearest neighbour (OpenCV's
  INTER_NEAREST index rule, `floor(x * src / dst)`), so no colour outside the palette appears;
- other maps with area averaging when shrinking, bicubic (a = -0.75, OpenCV's kernel) otherwise;
- black/white maps are re-binarised with Otsu's threshold after resizing, and maps of one-pixel edges
  (canny, threshold lines) are non-maximum suppressed and thinned back to one-pixel lines
  (`nake_nms` + `lvmin_thin`; hit-or-miss morphology reimplemented here in numpy, border pixels
  counting as either colour, as OpenCV's erode/dilate defaults make them);
- "resize and fill" fills the bands with the median colour of the map's border pixels instead of
  stretching the edge rows (bands copied from edge lines would add false edges to the control).

Everything is numpy / PIL / torch (mixkit has no OpenCV dependency). Nearest, the binary tests, Otsu
and the thinning follow OpenCV exactly; the cubic and area filters are torch's and PIL's, within a
grey level or so of OpenCV's fixed-point ones (binary maps are re-thresholded afterwards anyway).
"""

from __future__ import annotations

import numpy as np

# OpenCV's Otsu skips split points where either class weight is below FLT_EPSILON.
_FLT_EPSILON = 1.1920928955078125e-07
_THIN_ROUNDS = 32  # lvmin_thin's iteration cap


def fit_control_map(image, width: int, height: int, mode: str):
    """`image` (RGB PIL control map) at width x height by `mode`, as the extension's `detectmap_proc`."""
    from PIL import Image

    pixels = np.asarray(image.convert("RGB"))
    return Image.fromarray(_fit(pixels, width, height, mode, high_quality_resize))


def fit_inpaint_map(image, mask, width: int, height: int, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """A picture (RGB PIL) and its inpaint mask (HxW uint8) at width x height by `mode`, as `detectmap_proc` fits the
    extension's 4-channel inpaint maps: the colour as any map, the mask with the filter the colour got and then
    thresholded at 127 (0/255), and the bands of "resize and fill" masked (255), so they are painted (outpainting).
    Returns (HxWx3 uint8, HxW uint8 0/255). The extension resizes the colour in float32; here it is rounded to 8 bits."""
    rgba = np.dstack([np.asarray(image.convert("RGB")), np.asarray(mask, dtype=np.uint8)])

    def resize(pixels: np.ndarray, new_width: int, new_height: int) -> np.ndarray:
        colour, alpha = pixels[..., :3], pixels[..., 3:]
        if colour.shape[:2] != (new_height, new_width):
            shrinking = new_width * new_height < colour.shape[0] * colour.shape[1]
            alpha = _choose_filter(_colour_count(colour), shrinking)(alpha, new_width, new_height)
            colour = high_quality_resize(colour, new_width, new_height)
        return np.dstack([colour, np.where(alpha > 127, 255, 0).astype(np.uint8)])

    fitted = _fit(rgba, width, height, mode, resize, band_alpha=255)
    return np.ascontiguousarray(fitted[..., :3]), np.ascontiguousarray(fitted[..., 3])


def _fit(pixels: np.ndarray, width: int, height: int, mode: str, resize, band_alpha: int | None = None) -> np.ndarray:
    """`detectmap_proc`'s geometry for an HxWxC map: stretch, cover and cut the centre, or fit inside bands of the
    border's median colour (`band_alpha`: the value of a 4th, mask channel in the bands)."""
    if mode == "just resize":
        return resize(pixels, width, height)
    old_h, old_w = pixels.shape[:2]
    k_h, k_w = height / old_h, width / old_w
    if mode == "resize and fill":
        k = min(k_h, k_w)
        border_colour = _median_border_colour(pixels)
        if band_alpha is not None:
            border_colour[3] = band_alpha
        resized = resize(pixels, _round(old_w * k), _round(old_h * k))
        canvas = np.tile(border_colour[None, None], (height, width, 1))
        new_h, new_w = resized.shape[:2]
        top, left = max(0, (height - new_h) // 2), max(0, (width - new_w) // 2)
        canvas[top:top + new_h, left:left + new_w] = resized[:height - top, :width - left]
        return canvas
    k = max(k_h, k_w)  # "crop and resize": cover, then cut the centre
    resized = resize(pixels, _round(old_w * k), _round(old_h * k))
    new_h, new_w = resized.shape[:2]
    top, left = max(0, (new_h - height) // 2), max(0, (new_w - width) // 2)
    return np.ascontiguousarray(resized[top:top + height, left:left + width])


def _round(value: float) -> int:
    return int(np.round(value))  # the extension's safeint: numpy's half-to-even rounding


def _median_border_colour(pixels: np.ndarray) -> np.ndarray:
    borders = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]], axis=0)
    return np.median(borders, axis=0).astype(pixels.dtype)


def _colour_count(pixels: np.ndarray) -> int:
    return len(np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0))


def _choose_filter(colours: int, shrinking: bool):
    """The resize `high_quality_resize` uses for a map: nearest for palettes, area to shrink, cubic otherwise."""
    if 2 < colours < 200:
        return nearest_resize
    return area_resize if shrinking else cubic_resize


def high_quality_resize(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    """HxWx3 uint8 map at width x height, choosing the filter by what the map is (see the module docstring)."""
    if pixels.shape[:2] == (height, width):
        return pixels
    new_pixels, old_pixels = width * height, pixels.shape[0] * pixels.shape[1]
    colours = _colour_count(pixels)
    binary = colours == 2 and pixels.min() < 16 and pixels.max() > 240
    one_pixel_edges = binary and _is_one_pixel_edge_map(pixels)
    resized = _choose_filter(colours, new_pixels < old_pixels)(pixels, width, height)
    if not binary:
        return resized
    grey = np.mean(resized.astype(np.float32), axis=2).clip(0, 255).astype(np.uint8)
    if one_pixel_edges:
        grey = thin_edges(otsu_binarize(naked_nms(grey)), prune=new_pixels > old_pixels)
    else:
        grey = otsu_binarize(grey)
    return np.stack([grey] * 3, axis=2)


def _is_one_pixel_edge_map(pixels: np.ndarray) -> bool:
    """More than half of the white is removed by a 3x3 opening: thin lines, not filled regions."""
    opened = _dilate(_erode(pixels, np.ones((3, 3), bool)), np.ones((3, 3), bool))
    return int((opened < pixels).sum()) * 2 > int((pixels > 127).sum())


def _shifted_windows(pixels: np.ndarray, kernel: np.ndarray, fill):
    """The image shifted under each kernel cell that is set (padding `fill` outside the image)."""
    pad = [(1, 1), (1, 1)] + [(0, 0)] * (pixels.ndim - 2)
    padded = np.pad(pixels, pad, constant_values=fill)
    h, w = pixels.shape[:2]
    return [padded[dy:dy + h, dx:dx + w] for dy in range(3) for dx in range(3) if kernel[dy, dx]]


def _erode(pixels: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    # OpenCV's default erode border is the type's maximum: outside pixels never lower the minimum.
    return np.minimum.reduce(_shifted_windows(pixels, kernel, 255))


def _dilate(pixels: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    # OpenCV's default dilate border is the type's minimum: outside pixels never raise the maximum.
    return np.maximum.reduce(_shifted_windows(pixels, kernel, 0))


def nearest_resize(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    """OpenCV's INTER_NEAREST: destination pixel x takes source pixel floor(x * src / dst)."""
    old_h, old_w = pixels.shape[:2]
    # OpenCV computes the step as 1 / (dst / src); src / dst can differ in the last bit and floor differently.
    rows = np.minimum(np.floor(np.arange(height) * (1.0 / (height / old_h))).astype(int), old_h - 1)
    cols = np.minimum(np.floor(np.arange(width) * (1.0 / (width / old_w))).astype(int), old_w - 1)
    return np.ascontiguousarray(pixels[rows][:, cols])


def area_resize(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    """Shrinking by averaging the source area each destination pixel covers (OpenCV's INTER_AREA:
    fractional overlaps weigh in proportionally)."""
    rows = _area_weights(pixels.shape[0], height)
    cols = _area_weights(pixels.shape[1], width)
    # Two matrix products per channel (rows @ pixels @ cols.T): an unoptimised three-operand einsum summed over
    # both source axes at once and took minutes for a 512-px map.
    source = pixels.astype(np.float64)
    out = np.stack([rows @ source[:, :, channel] @ cols.T for channel in range(source.shape[2])], axis=2)
    return np.rint(out).clip(0, 255).astype(np.uint8)


def _area_weights(old: int, new: int) -> np.ndarray:
    """new x old matrix: the share of destination pixel i's span [i * s, (i + 1) * s) covered by source pixel j."""
    scale = old / new
    starts = np.arange(new)[:, None] * scale
    ends = starts + scale
    overlap = np.minimum(ends, np.arange(1, old + 1)[None]) - np.maximum(starts, np.arange(old)[None])
    return np.clip(overlap, 0, None) / scale


def cubic_resize(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    """Bicubic with OpenCV's kernel (a = -0.75, half-pixel centres, edge pixels replicated)."""
    import torch

    tensor = torch.from_numpy(np.array(pixels, dtype=np.float64)).permute(2, 0, 1)[None]
    out = torch.nn.functional.interpolate(tensor, size=(height, width), mode="bicubic", align_corners=False)
    return out[0].permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy()


def naked_nms(grey: np.ndarray) -> np.ndarray:
    """The extension's `nake_nms`: keep a pixel where it is the maximum along some line through it
    (horizontal, vertical or either diagonal), so a blurred line keeps only its ridge."""
    kept = np.zeros_like(grey)
    lines = (np.array([[0, 0, 0], [1, 1, 1], [0, 0, 0]], bool), np.array([[0, 1, 0], [0, 1, 0], [0, 1, 0]], bool),
             np.eye(3, dtype=bool), np.fliplr(np.eye(3, dtype=bool)))
    for line in lines:
        ridge = _dilate(grey, line) == grey
        kept[ridge] = grey[ridge]
    return kept


def otsu_threshold(grey: np.ndarray) -> int:
    """OpenCV's Otsu level for a uint8 image (its loop, in double precision, first maximum wins)."""
    histogram = np.bincount(grey.ravel(), minlength=256).astype(np.float64)
    scale = 1.0 / grey.size
    mean = float((np.arange(256) * histogram).sum()) * scale
    mean_low, weight_low, best_sigma, best = 0.0, 0.0, 0.0, 0
    for level in range(256):
        p = histogram[level] * scale
        mean_low *= weight_low
        weight_low += p
        weight_high = 1.0 - weight_low
        if min(weight_low, weight_high) < _FLT_EPSILON or max(weight_low, weight_high) > 1.0 - _FLT_EPSILON:
            continue
        mean_low = (mean_low + level * p) / weight_low
        mean_high = (mean - weight_low * mean_low) / weight_high
        sigma = weight_low * weight_high * (mean_low - mean_high) ** 2
        if sigma > best_sigma:
            best_sigma, best = sigma, level
    return best


def otsu_binarize(grey: np.ndarray) -> np.ndarray:
    """255 above Otsu's level, 0 elsewhere (`cv2.threshold(..., THRESH_BINARY + THRESH_OTSU)`)."""
    return np.where(grey > otsu_threshold(grey), 255, 0).astype(np.uint8)


def _rotations(*kernels) -> list[np.ndarray]:
    return [np.rot90(np.array(k), turns) for turns in range(4) for k in kernels]


# lvmin_thin's hit-or-miss patterns: 1 must be white, -1 must be black, 0 either. Each removes a white
# pixel that a one-pixel line does not need (a corner of a thick line, a spur).
_THIN_KERNELS = _rotations([[-1, -1, -1], [0, 1, 0], [1, 1, 1]], [[0, -1, -1], [1, 1, -1], [0, 1, 0]])
_PRUNE_KERNELS = _rotations([[-1, -1, -1], [-1, 1, -1], [0, 0, -1]], [[-1, -1, -1], [-1, 1, -1], [-1, 0, 0]])


def _hit_or_miss(binary: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """Where the 3x3 neighbourhood matches `kernel` (OpenCV's MORPH_HITMISS: outside pixels match anything)."""
    white = binary > 0
    must_white = _shifted_windows(white, kernel == 1, True)
    must_black = _shifted_windows(~white, kernel == -1, True)
    return np.logical_and.reduce(must_white + must_black)


def _remove_patterns(binary: np.ndarray, kernels) -> bool:
    """Blank every pixel matching each kernel in turn (in place); True if any pixel changed."""
    changed = False
    for kernel in kernels:
        hits = _hit_or_miss(binary, kernel)
        if hits.any():
            binary[hits] = 0
            changed = True
    return changed


def thin_edges(binary: np.ndarray, prune: bool) -> np.ndarray:
    """The extension's `lvmin_thin`: thin a 0/255 map to one-pixel lines (at most 32 rounds), then,
    when the map was enlarged, remove one-pixel spurs once."""
    thinned = binary.copy()
    for _ in range(_THIN_ROUNDS):
        if not _remove_patterns(thinned, _THIN_KERNELS):
            break
    if prune:
        _remove_patterns(thinned, _PRUNE_KERNELS)
    return thinned
