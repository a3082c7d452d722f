"""Trainable DoRA adapters (weight-decomposed LoRA, Liu et al. 2024) in LyCORIS's convention (`dora_wd=True`).

The adapted layer's weight is `m * W' / (||W'|| + eps)` for `W' = W + s * up @ down`, the norm per output row
(LyCORIS 4.1.3's default `wd_on_output=True`) and not detached (LyCORIS lets the gradient through it), `m` the
trained magnitude, stored as the file's `<module>.dora_scale` of shape `[out, 1]` (`[out, 1, 1, 1]` for a conv),
exactly what LyCORIS writes and `mixkit.lora.deltas.dora_weight` reads.

Because the magnitude and the norm are per output channel, the adapted output never needs the merged weight in a
matmul: with `g = m / (||W'|| + eps)` it is `g * (W x + s * up(down(x))) + b`, and `W x + b` is the base layer's
own output. So a forward costs the plain LoRA path plus one `[out, rank] @ [rank, in*k*k]` product for the norm
and one fused elementwise op on the output, where LyCORIS rebuilds and runs the whole merged weight.
"""

from __future__ import annotations

import torch
from torch import nn

from mixkit.training.lora_network import LoraAdapter


def row_norms(weight: torch.Tensor) -> torch.Tensor:
    """The float32 norm of each output row of a Linear / Conv2d weight (its kernel axes included), shape `[out]`."""
    return weight.detach().float().reshape(weight.shape[0], -1).norm(dim=1)


class DoraAdapter(LoraAdapter):
    """A `LoraAdapter` whose layer's weight is re-normalised per output row and rescaled by a trained magnitude."""

    def __init__(self, base: nn.Module, rank: int, alpha: float | None) -> None:
        """`dora_scale` starts at the base weight's row norms plus the eps the norm is divided by, so that with
        `up` at zero the first forward gives exactly the base layer's output (LyCORIS starts at the bare norms, which
        differs from the base by one float32 eps relative; the file reads the same in every loader either way)."""
        super().__init__(base, rank, alpha)
        self._base = (base,)  # a tuple, so the frozen layer joins neither parameters() nor state_dict()
        norms = row_norms(base.weight) + torch.finfo(torch.float32).eps
        self.dora_scale = nn.Parameter(norms.reshape(-1, *([1] * (base.weight.dim() - 1))))

    def _scaled_up(self) -> torch.Tensor:
        # Unlike plain LoRA the multiplier cannot ride on up: it scales the change of the normalised weight
        # (`added_to`), as A1111 and ComfyUI apply a DoRA file's strength.
        return self.lora_up.weight * (float(self.alpha) / self.rank)

    def magnitude_ratio(self) -> torch.Tensor:
        """`m / (||W + s * up @ down|| + eps)` per output row, float32 `[out]`; differentiable in up, down and m."""
        weight = self._base[0].weight
        # In float32 even under autocast: a bf16 norm would move every row's scale by up to 0.4%.
        with torch.autocast(weight.device.type, enabled=False):
            merged = torch.addmm(weight.detach().float().reshape(weight.shape[0], -1),
                                 self.lora_up.weight.float().flatten(1), self.lora_down.weight.float().flatten(1),
                                 alpha=float(self.alpha) / self.rank)
            return self.dora_scale.flatten().float() / (merged.norm(dim=1) + torch.finfo(torch.float32).eps)

    def added_to(self, out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The DoRA layer's output from the base layer's `out = W x + b`: `g * (out + s * up(down(x))) + (1 - g) * b`,
        blended with `out` by the multiplier (1 in training)."""
        if self._skipped():
            return out
        # The sum rides in the up matmul as plain LoRA's does, and g's product and the bias term are one addcmul:
        # 1.5 ms over plain LoRA's step where three separate ops cost 3.3 ms (a 128-wide Linear, 4096 tokens, CPU).
        summed = self._plus_low_rank(out, x)
        channels = (-1, 1, 1) if isinstance(self.lora_up, nn.Conv2d) else (-1,)  # a conv's channels precede H, W
        ratio = self.magnitude_ratio().view(channels)
        bias = self._base[0].bias
        # (1 - g) * b instead of subtracting b from out: with g exactly 1 the output is exactly out.
        adapted = (summed * ratio if bias is None
                   else torch.addcmul((1 - ratio) * bias.detach().float().view(channels), summed, ratio))
        if self.multiplier != 1.0:
            adapted = out + self.multiplier * (adapted - out)
        return adapted.to(out.dtype)
