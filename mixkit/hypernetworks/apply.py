"""Apply hypernetworks to a diffusers UNet for one call: the context of every attention's keys and values goes
through the hypernetwork of its width first.

A1111 (v1.10, every attention optimisation) passes the attention's context (the text embedding in cross-attention,
the hidden states themselves in self-attention, whose widths 320/640/1280 are why files carry those keys) through
each loaded hypernetwork in turn: `context_k = hn_k(context_k)`, `context_v = hn_v(context_v)`, each
`x + mlp(x) * multiplier`, then `to_k(context_k)` and `to_v(context_v)`. A width a file has no entry for is left
alone. Here the `to_k` / `to_v` projections' forwards are wrapped (never their weights), which every attention
processor calls, so the change composes with whatever processor is installed (mixkit's, sliced, HyperTile's) and
with other forward patches, stacked above or below in any order (`mixkit.forward_patches.ForwardPatch`);
`remove()` takes out exactly its own wrappers. The wrappers stay above a runtime LoRA's on the same projection
whichever was applied first, so the LoRA sees the hypernetwork's output, as in A1111.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn

from mixkit.forward_patches import ForwardPatch, install_forward_patch
from mixkit.hypernetworks.network import Hypernetwork, HypernetworkMLP
from mixkit.finite_numbers import is_finite_number

# Far beyond any use (A1111's slider goes to 2), far below what overflows an fp16 context.
MAX_HYPERNETWORK_STRENGTH = 100.0


@dataclass(frozen=True)
class HypernetworkApplication:
    """One hypernetwork at one strength (A1111's multiplier, the tag's second field)."""

    hypernetwork: Hypernetwork
    strength: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.hypernetwork, Hypernetwork):
            raise TypeError(f"expected a Hypernetwork (mixkit.hypernetworks.load_hypernetwork), "
                            f"got {type(self.hypernetwork).__name__}")
        check_hypernetwork_strength(self.strength, self.hypernetwork.name)


def check_hypernetwork_strength(strength, name: str) -> float:
    if not is_finite_number(strength):
        raise ValueError(f"hypernetwork {name!r}: strength must be a finite number, got {strength!r}")
    if abs(strength) > MAX_HYPERNETWORK_STRENGTH:
        raise ValueError(f"hypernetwork {name!r}: strength {strength!r} is beyond ±{MAX_HYPERNETWORK_STRENGTH:g}; "
                         "such a context overflows into a black image (hypernetworks are used near 0..1)")
    return float(strength)


def _chained_forward(chain: list[tuple[HypernetworkMLP, float]]):
    def forward(below, x: torch.Tensor) -> torch.Tensor:
        # The MLPs stay float32, as A1111 keeps them (fp16 contexts are computed up and cast back)
        context = x.to(torch.float32)
        for mlp, strength in chain:
            context = mlp(context, strength)
        return below(context.to(x.dtype))

    return forward


class AppliedHypernetworks:
    """The wrapped projections of one `apply_hypernetworks` call; `remove()` takes exactly these wrappers out."""

    def __init__(self) -> None:
        self._patches: list[ForwardPatch] = []
        self.widths: dict[str, list[int]] = {}  # hypernetwork name -> the widths that found an attention

    def _wrap(self, projection: nn.Module, chain: list[tuple[HypernetworkMLP, float]]) -> None:
        # Over whatever forward the projection has (a runtime LoRA's, say), which it then calls with the transformed
        # context; marked as transforming the input, so a runtime LoRA applied later still goes below it and computes
        # on hn(x), as A1111's does, and not on the raw context
        self._patches.append(install_forward_patch(projection, _chained_forward(chain), "hypernetwork",
                                                   transforms_input=True))

    def remove(self) -> None:
        """Take every wrapper out (last wrapped first), leaving other patches, stacked above or below, in place;
        calling it twice is harmless."""
        while self._patches:
            self._patches.pop().remove()

    def __enter__(self) -> "AppliedHypernetworks":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _attention_modules(unet: nn.Module) -> list[tuple[str, nn.Module]]:
    from diffusers.models.attention_processor import Attention

    return [(name, module) for name, module in unet.named_modules() if isinstance(module, Attention)]


def apply_hypernetworks(unet: nn.Module, applications: list[HypernetworkApplication]) -> AppliedHypernetworks:
    """Wrap the key/value projections of every attention of `unet` with the hypernetworks of `applications`, in
    order (the first one sees the raw context), until `remove()`. Nothing is changed when a check fails.

    A hypernetwork none of whose widths meets an attention (an SD1 file on SDXL's 2048-wide context, say) does
    nothing, as in A1111, with a warning naming its widths and the model's.
    """
    if not isinstance(unet, nn.Module):
        raise TypeError(f"apply_hypernetworks expects the UNet (a torch module), got {type(unet).__name__}")
    applications = list(applications)
    for application in applications:
        if not isinstance(application, HypernetworkApplication):
            raise TypeError(f"applications must be HypernetworkApplication items, got {type(application).__name__}")
    attentions = _attention_modules(unet)
    fused = [name for name, module in attentions if getattr(module, "fused_projections", False)]
    if fused and applications:
        raise ValueError(f"hypernetworks cannot act on fused key/value projections ({fused[0]} and "
                         f"{len(fused) - 1} more); call unet.unfuse_qkv_projections() first")
    widths = sorted({module.to_k.in_features for _, module in attentions if isinstance(module.to_k, nn.Linear)})
    for application in applications:
        if not set(application.hypernetwork.widths) & set(widths):
            warnings.warn(f"hypernetwork {application.hypernetwork.name!r} not applied: its context widths "
                          f"{application.hypernetwork.widths} are none of this model's attention widths {widths}, "
                          "so it was trained for another model family (A1111 skips it silently).", UserWarning,
                          stacklevel=2)
    applied = AppliedHypernetworks()
    if not applications:
        return applied
    device = next(unet.parameters()).device
    for application in applications:
        hypernetwork = application.hypernetwork
        for pair in hypernetwork.layers.values():
            for mlp in pair:
                mlp.to(device)
        applied.widths[hypernetwork.name] = sorted(set(hypernetwork.widths) & set(widths))
    try:
        for _, module in attentions:
            if not isinstance(module.to_k, nn.Linear) or not isinstance(module.to_v, nn.Linear):
                continue
            width = module.to_k.in_features
            entries = [(application.hypernetwork.layers[width], application.strength) for application in applications
                       if width in application.hypernetwork.layers]
            if not entries:
                continue
            applied._wrap(module.to_k, [(pair[0], strength) for pair, strength in entries])
            applied._wrap(module.to_v, [(pair[1], strength) for pair, strength in entries])
    except BaseException:
        applied.remove()  # an interruption half way leaves no projection wrapped
        raise
    return applied
