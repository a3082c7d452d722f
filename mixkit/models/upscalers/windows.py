"""Window attention shared by the Swin-style upscalers (SwinIR's square windows, DAT's rectangular ones).

An image of tokens is cut into non-overlapping wh x ww windows (row-major, tokens row-major inside), attention runs
inside each window with a per-head relative-position bias, and shifted layers add a mask so that tokens rolled
across the image edge do not attend to each other. The mask values and window order are those of the Swin
Transformer code the SwinIR and DAT releases were trained with, so their weights see the same scores.
"""

from __future__ import annotations

import torch

from mixkit.attention import attention

SHIFT_MASK_VALUE = -100.0  # Swin's score for token pairs from different regions of a shifted window
# Attention runs on at most this many score entries (batch x windows x heads x N x N) at a time: a whole 1024x1024
# image has 16384 SwinIR windows of 64 tokens, whose scores and masks would take about 2 GB each in float32.
ATTENTION_CHUNK_SCORES = 1 << 25
# The most tokens a window may hold. Every block keeps an (N, N) relative-position index and every shifted layer an
# (windows, N, N) mask, so memory grows with N squared: the released models use 64 (SwinIR's 8 x 8) and 256 (DAT's
# 8 x 32); a file claiming 200 x 200 windows would ask for gigabytes per block from a few hundred kilobytes.
MAX_WINDOW_TOKENS = 1024
# The most transformer blocks a Swin-style upscaler may have (the released ones have 36 to 54). Their count comes from
# key names, so a small file could otherwise name thousands, each to be laid out before its weights are found missing.
MAX_BLOCKS = 1024


def partition(x: torch.Tensor, wh: int, ww: int) -> torch.Tensor:
    """(B, H, W, C) with H, W whole windows -> (B, windows, wh*ww, C)."""
    b, h, w, c = x.shape
    x = x.view(b, h // wh, wh, w // ww, ww, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b, (h // wh) * (w // ww), wh * ww, c)


def merge(windows: torch.Tensor, wh: int, ww: int, h: int, w: int) -> torch.Tensor:
    """The inverse of `partition`: (B, windows, wh*ww, C) -> (B, H, W, C)."""
    b, _, _, c = windows.shape
    return windows.view(b, h // wh, w // ww, wh, ww, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)


def relative_position_index(wh: int, ww: int) -> torch.Tensor:
    """(N, N) index of token i's offset from token j, (dy + wh - 1) * (2 * ww - 1) + (dx + ww - 1), into a table of
    the (2 * wh - 1) * (2 * ww - 1) possible offsets."""
    coords = torch.stack(torch.meshgrid(torch.arange(wh), torch.arange(ww), indexing="ij")).flatten(1)
    offsets = coords[:, :, None] - coords[:, None, :]
    return (offsets[0] + wh - 1) * (2 * ww - 1) + offsets[1] + ww - 1


def shift_mask(h: int, w: int, wh: int, ww: int, sh: int, sw: int, device=None) -> torch.Tensor:
    """(windows, N, N) scores for an image rolled up by sh and left by sw: 0 within one region, SHIFT_MASK_VALUE
    between regions (the last window row and column hold the rolled-over strips)."""
    def regions(length: int, size: int, shift: int) -> torch.Tensor:
        ids = torch.zeros(length, device=device)
        ids[length - size:length - shift] = 1
        ids[length - shift:] = 2
        return ids

    label = (regions(h, wh, sh)[:, None] * 3 + regions(w, ww, sw)[None, :])[None, :, :, None]
    label = partition(label, wh, ww)[0, ..., 0]  # (windows, N)
    differ = label[:, :, None] != label[:, None, :]
    return torch.zeros(differ.shape, device=device).masked_fill_(differ, SHIFT_MASK_VALUE)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, mask: torch.Tensor | None,
           chunk_scores: int = ATTENTION_CHUNK_SCORES) -> torch.Tensor:
    """Softmax attention per window: q, k, v (B, windows, heads, N, d), bias (heads, N, N), mask (windows, N, N) or
    None -> (B, windows, N, heads * d), scaled by 1/sqrt(d), in chunks of windows of at most `chunk_scores` scores."""
    b, count, heads, n, d = q.shape
    step = max(1, chunk_scores // (b * heads * n * n))
    bias = bias.to(q.dtype)
    outputs = []
    for start in range(0, count, step):
        qc, kc, vc = (t[:, start:start + step] for t in (q, k, v))
        windows = qc.shape[1]
        if mask is None:  # one bias for every window: the windows join the batch
            shape, scores_bias = (b * windows, heads, n, d), bias
        else:  # a mask per window: windows x heads as the head axis, broadcast over the batch
            shape = (b, windows * heads, n, d)
            scores_bias = (mask[start:start + step].to(q.dtype)[:, None] + bias).flatten(0, 1)
        out = attention(qc.reshape(shape), kc.reshape(shape), vc.reshape(shape), attn_mask=scores_bias)
        outputs.append(out.view(b, windows, heads, n, d).transpose(2, 3).reshape(b, windows, n, heads * d))
    return outputs[0] if len(outputs) == 1 else torch.cat(outputs, 1)


def reflect_pad_to_multiple(x: torch.Tensor, multiple: int) -> torch.Tensor:
    """Extend the bottom and right edges of (B, C, H, W) by reflection (edge pixel not repeated) up to a multiple of
    `multiple`, as spandrel (which A1111 runs HAT and ScuNET through) pads them. torch's reflect pad needs the pad to
    be smaller than the side, so a side smaller than its pad is reflected again until it is large enough (a one-pixel
    side is repeated)."""
    from torch.nn import functional as F

    for dim in (2, 3):
        missing = -x.shape[dim] % multiple
        while missing:
            step = min(missing, x.shape[dim] - 1)
            pad = (0, 0, 0, step) if dim == 2 else (0, step, 0, 0)
            x = F.pad(x, pad, mode="reflect") if step else F.pad(x, (0, 0, 0, 1) if dim == 2 else (0, 1, 0, 0),
                                                                    mode="replicate")
            missing -= step or 1
    return x
