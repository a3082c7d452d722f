"""What an optimisation actually did, so a fallback is never silent."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field


class RuntimeFallbackWarning(UserWarning):
    """An optimisation was requested but could not be used; mixkit ran the safe path instead."""


@dataclass
class OptimizationReport:
    """Steps applied (in order), fallbacks taken, and the precision chosen.

    `labels` holds the short infotext names (e.g. "channels-last") of the steps that ran, in order:
    the infotext's `Optimization:` is built from them, so a step a backend skipped or a fallback
    replaced is never named there.
    """

    preset: str
    backend: str
    applied: list[str] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    precision: str = "float32"
    nan_fallbacks: int = 0  # images decoded again in fp32 because the reduced-precision VAE gave NaN/inf
    # Called with the report after each fallback: a fallback during generation (compile failing on first use)
    # changes what runs after `optimize()` returned, so whoever labels images from the report re-reads it.
    on_fallback: list[Callable[["OptimizationReport"], None]] = field(default_factory=list, repr=False, compare=False)

    def step(self, description: str, label: str | None = None) -> None:
        """Record a step that ran; `label` is its infotext name when the `Optimization:` value lists it."""
        self.applied.append(description)
        if label is not None:
            self.labels.append(label)

    def fallback(self, message: str) -> None:
        """Record a fallback and warn (RuntimeFallbackWarning), as the issue asks: say so, never crash."""
        self.fallbacks.append(message)
        warnings.warn(message, RuntimeFallbackWarning, stacklevel=3)
        for listener in self.on_fallback:
            listener(self)

    def summary(self) -> str:
        lines = [f"preset={self.preset} backend={self.backend} precision={self.precision}"]
        lines += [f"  + {item}" for item in self.applied]
        lines += [f"  ! {item}" for item in self.fallbacks]
        return "\n".join(lines)
