"""Bipartite soft matching for token merging (ToMe; Bolya & Hoffman 2023, "Token Merging for Fast
Stable Diffusion"): the pure tensor math, no model in sight.

The tokens of one attention layer form an `height x width` grid. The grid is cut into `stride x
stride` windows and one token per window becomes a *destination*; every other token is a
*source*. Each source is paired with its most similar destination (cosine similarity), and the
`r` sources with the most similar partners are averaged into them. Attention then runs on
`N - r` tokens; `unmerge` copies each merged result back to every token that went into it, so
the layer's output has all `N` tokens again. Choosing destinations on a grid (instead of ToMe's
original alternating split) is what keeps merges spatially spread out in an image, per the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def destination_mask(height: int, width: int, stride: int, choice: torch.Tensor | None = None) -> torch.Tensor:
    """Bool [height * width]: True for the one destination token chosen in each full window.

    `choice` holds, per window (row-major, `[height // stride, width // stride]`), the position of
    the destination inside its window (0 .. stride**2 - 1, row-major); None picks the top-left
    one everywhere. Tokens in a partial window at the right or bottom edge are all sources.
    """
    rows, cols = height // stride, width // stride
    if choice is None:
        choice = torch.zeros(rows, cols, dtype=torch.long)
    window_row = torch.arange(rows).view(rows, 1) * stride + choice // stride
    window_col = torch.arange(cols).view(1, cols) * stride + choice % stride
    mask = torch.zeros(height, width, dtype=torch.bool)
    mask[window_row, window_col] = True
    return mask.flatten()


def tokens_to_merge(token_count: int, ratio: float) -> int:
    """How many tokens a ratio removes: `int(N * ratio)` (rounded down, so ratio 0 removes none)."""
    return int(token_count * ratio)


@dataclass
class TokenMerge:
    """One matching, applied with `merge` before attention and `unmerge` after it.

    Index tensors are `[B, k]` positions into the full token sequence (batch rows merge
    independently: the conditional and unconditional halves of CFG differ).
    """

    token_count: int
    kept_sources: torch.Tensor  # [B, S - r] sources left alone, most-similar-first order
    merged_sources: torch.Tensor  # [B, r] sources averaged into a destination
    merged_into: torch.Tensor  # [B, r] index (0 .. D-1) of the destination each merged source joins
    destinations: torch.Tensor  # [D] destination positions (the same for every row)

    @property
    def removed(self) -> int:
        return self.merged_sources.shape[1]

    def merge(self, x: torch.Tensor) -> torch.Tensor:
        """[B, N, C] -> [B, N - r, C]: kept sources first, then destinations (each a mean of its group)."""
        batch, _, channels = x.shape
        kept = torch.gather(x, 1, _expand(self.kept_sources, channels))
        incoming = torch.gather(x, 1, _expand(self.merged_sources, channels))
        targets = x[:, self.destinations]
        # include_self: a destination counts as one member of its own group, so a group's value is
        # the plain mean of every token in it.
        targets = targets.scatter_reduce(1, _expand(self.merged_into, channels), incoming, reduce="mean",
                                         include_self=True)
        return torch.cat([kept, targets], dim=1)

    def unmerge(self, y: torch.Tensor) -> torch.Tensor:
        """[B, N - r, C] -> [B, N, C]: every token gets the value its group came out with."""
        batch, _, channels = y.shape
        kept_count = self.kept_sources.shape[1]
        kept, targets = y[:, :kept_count], y[:, kept_count:]
        out = y.new_empty(batch, self.token_count, channels)
        out[:, self.destinations] = targets
        out.scatter_(1, _expand(self.kept_sources, channels), kept)
        out.scatter_(1, _expand(self.merged_sources, channels), torch.gather(targets, 1, _expand(self.merged_into, channels)))
        return out


def plan_token_merge(metric: torch.Tensor, height: int, width: int, removed: int, *, stride: int = 2,
                     choice: torch.Tensor | None = None) -> TokenMerge:
    """Match the tokens of `metric` ([B, N, C], N = height * width) and plan removing `removed` of them.

    At most the number of sources can be removed (3/4 of the tokens for stride 2); a larger
    `removed` is capped, as in the paper's implementation.
    """
    batch, count, _ = metric.shape
    if count != height * width:
        raise ValueError(f"metric has {count} tokens, but the grid is {height}x{width} = {height * width}")
    is_destination = destination_mask(height, width, stride, choice).to(metric.device)
    destinations = torch.nonzero(is_destination).flatten()
    sources = torch.nonzero(~is_destination).flatten()
    removed = max(0, min(removed, sources.numel()))
    with torch.no_grad():
        unit = metric / metric.norm(dim=-1, keepdim=True)
        similarity = unit[:, sources] @ unit[:, destinations].transpose(1, 2)  # [B, S, D]
        best_score, best_destination = similarity.max(dim=-1)
        order = best_score.argsort(dim=-1, descending=True)  # most similar sources merge first
    merged = order[:, :removed]
    return TokenMerge(
        token_count=count,
        kept_sources=sources[order[:, removed:]],
        merged_sources=sources[merged],
        merged_into=torch.gather(best_destination, 1, merged),
        destinations=destinations,
    )


def _expand(index: torch.Tensor, channels: int) -> torch.Tensor:
    return index.unsqueeze(-1).expand(-1, -1, channels)
