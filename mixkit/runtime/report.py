"""What an optimisation actually did, so a fallback is never silent."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field


class RuntimeFallbackWarning(UserWarning):
    """An optimisation was requested but could not be used; mixkit ran the safe path instead."""


@dataclass
class OptimizationReport:
    """Steps applied (in order), fallbacks taken, and the precision chosen."""

    preset: str
    backend: str
    applied: list[str] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)
    precision: str = "float32"
    nan_fallbacks: int = 0  # images decoded again in fp32 because the reduced-precision VAE gave NaN/inf

    def step(self, description: str) -> None:
        self.applied.append(description)

    def fallback(self, message: str) -> None:
        """Record a fallback and warn (RuntimeFallbackWarning), as the issue asks: say so, never crash."""
        self.fallbacks.append(message)
        warnings.warn(message, RuntimeFallbackWarning, stacklevel=3)

    def summary(self) -> str:
        lines = [f"preset={self.preset} backend={self.backend} precision={self.precision}"]
        lines += [f"  + {item}" for item in self.applied]
        lines += [f"  ! {item}" for item in self.fallbacks]
        return "\n".join(lines)
