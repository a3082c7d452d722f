"""The registry of ControlNet preprocessors ("modules" in sd-webui-controlnet), chosen by name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mixkit.registry import Registry


@dataclass(frozen=True)
class Preprocessor:
    """One way of turning an input picture into a control image.

    `run(image, threshold_a, threshold_b)` takes and returns an RGB PIL image. The thresholds are
    sd-webui-controlnet's two generic sliders (canny: low/high; threshold: level; blur: sigma);
    `threshold_a`/`threshold_b` here give their default and allowed range, None when unused.
    """

    name: str
    run: Callable
    threshold_a: tuple[float, float, float] | None = None  # (default, low, high)
    threshold_b: tuple[float, float, float] | None = None
    needs_weights: bool = False

    def resolve_thresholds(self, threshold_a: float | None, threshold_b: float | None) -> tuple[float | None, float | None]:
        """Fill in defaults and check ranges; raise ValueError naming the preprocessor and value."""
        return (_resolve(self.name, "threshold_a", self.threshold_a, threshold_a),
                _resolve(self.name, "threshold_b", self.threshold_b, threshold_b))


def _resolve(name: str, label: str, spec, value):
    import math

    if spec is None or value is None:
        return None if spec is None else spec[0]
    default, low, high = spec
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not low <= value <= high:
        raise ValueError(f"Preprocessor {name!r}: {label} must be a number in [{low}, {high}], got {value!r}.")
    return value


PREPROCESSORS: Registry[Preprocessor] = Registry("preprocessor")


def register_preprocessor(preprocessor: Preprocessor) -> Preprocessor:
    return PREPROCESSORS.register(preprocessor.name, preprocessor)


def run_preprocessor(name: str, image, threshold_a: float | None = None, threshold_b: float | None = None):
    """Turn `image` (PIL) into a control image with the named preprocessor (RGB PIL image out)."""
    from PIL import Image

    preprocessor = PREPROCESSORS.get(name)
    if not isinstance(image, Image.Image):
        raise TypeError(f"Preprocessor {name!r} needs a PIL image, got {type(image).__name__}.")
    a, b = preprocessor.resolve_thresholds(threshold_a, threshold_b)
    return preprocessor.run(image.convert("RGB"), a, b).convert("RGB")
