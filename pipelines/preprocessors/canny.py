"""Canny edge detection in numpy, following OpenCV's `cv2.Canny(image, low, high)` step by step.

sd-webui-controlnet's "canny" module calls OpenCV on the RGB control image (3x3 Sobel, L1
gradient magnitude, thresholds on that scale, default 100/200), and canny ControlNets were
trained on such maps. Reproducing it in numpy keeps OpenCV an optional dependency while giving
the same edges (the tests compare with OpenCV when it is installed).
"""

from __future__ import annotations

import numpy as np

# OpenCV quantises the gradient direction in 15-bit fixed point: tan(22.5 deg) * 2**15 = 13573,
# and tan(67.5 deg) = tan(22.5 deg) + 2 exactly.
_TAN_22_5_FIXED = 13573


def sobel_gradients(channel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """3x3 Sobel derivatives (dx, dy) of one channel, border replicated as OpenCV's Canny does."""
    p = np.pad(channel.astype(np.int32), 1, mode="edge")
    dx = (p[:-2, 2:] + 2 * p[1:-1, 2:] + p[2:, 2:]) - (p[:-2, :-2] + 2 * p[1:-1, :-2] + p[2:, :-2])
    dy = (p[2:, :-2] + 2 * p[2:, 1:-1] + p[2:, 2:]) - (p[:-2, :-2] + 2 * p[:-2, 1:-1] + p[:-2, 2:])
    return dx, dy


def _strongest_channel_gradients(pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For colour images OpenCV keeps, per pixel, the channel with the largest L1 gradient."""
    if pixels.ndim == 2:
        pixels = pixels[..., None]
    best_dx = best_dy = best_mag = None
    for c in range(pixels.shape[2]):
        dx, dy = sobel_gradients(pixels[..., c])
        mag = np.abs(dx) + np.abs(dy)
        if best_mag is None:
            best_dx, best_dy, best_mag = dx, dy, mag
        else:
            better = mag > best_mag
            best_dx, best_dy, best_mag = (np.where(better, dx, best_dx), np.where(better, dy, best_dy),
                                          np.where(better, mag, best_mag))
    return best_dx, best_dy, best_mag


def _non_maximum_suppression(dx, dy, mag, low: float) -> np.ndarray:
    """True where the magnitude is above `low` and a local maximum across the edge.

    Like OpenCV, along a horizontal or vertical gradient a pixel must be strictly greater than
    its neighbour on one side and greater or equal on the other (a plateau two pixels wide keeps
    one of them); along a diagonal it must be strictly greater than both.
    """
    h, w = mag.shape
    m = np.pad(mag, 1)  # zero border, as OpenCV's magnitude buffer
    centre = m[1:-1, 1:-1]
    ax, ay = np.abs(dx).astype(np.int64), np.abs(dy).astype(np.int64) << 15
    tan_22_5_x = ax * _TAN_22_5_FIXED
    horizontal = ay < tan_22_5_x
    vertical = ay > tan_22_5_x + (ax << 16)
    diagonal = ~(horizontal | vertical)
    same_sign = (dx ^ dy) >= 0  # the edge runs from top-left to bottom-right

    def shifted(row: int, col: int) -> np.ndarray:
        return m[1 + row:1 + row + h, 1 + col:1 + col + w]

    keep_h = (centre > shifted(0, -1)) & (centre >= shifted(0, 1))
    keep_v = (centre > shifted(-1, 0)) & (centre >= shifted(1, 0))
    keep_d_same = (centre > shifted(-1, -1)) & (centre > shifted(1, 1))
    keep_d_other = (centre > shifted(-1, 1)) & (centre > shifted(1, -1))
    keep_d = np.where(same_sign, keep_d_same, keep_d_other)
    local_max = (horizontal & keep_h) | (vertical & keep_v) | (diagonal & keep_d)
    return local_max & (mag > low)


def _hysteresis(candidates: np.ndarray, strong: np.ndarray) -> np.ndarray:
    """Keep candidate pixels 8-connected to a strong one (a flood fill over edge pixels only)."""
    h, w = candidates.shape
    edges = np.zeros_like(candidates)
    stack = list(zip(*np.nonzero(strong)))
    for y, x in stack:
        edges[y, x] = True
    while stack:
        y, x = stack.pop()
        for ny in (y - 1, y, y + 1):
            for nx in (x - 1, x, x + 1):
                if 0 <= ny < h and 0 <= nx < w and candidates[ny, nx] and not edges[ny, nx]:
                    edges[ny, nx] = True
                    stack.append((ny, nx))
    return edges


def canny_edges(pixels: np.ndarray, low: float = 100, high: float = 200) -> np.ndarray:
    """uint8 edge map (255 = edge) of an HxW or HxWxC uint8 image, as `cv2.Canny(pixels, low, high)`."""
    if low > high:
        low, high = high, low  # OpenCV swaps them too
    dx, dy, mag = _strongest_channel_gradients(pixels)
    candidates = _non_maximum_suppression(dx, dy, mag, low)
    strong = candidates & (mag > high)
    return (_hysteresis(candidates, strong) * 255).astype(np.uint8)
