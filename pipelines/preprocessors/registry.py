"""The registry of ControlNet preprocessors ("modules" in sd-webui-controlnet), chosen by name."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from mixkit.finite_numbers import is_finite_number
from mixkit.registry import Registry


@dataclass(frozen=True)
class Slider:
    """One of sd-webui-controlnet's preprocessor sliders (`preprocessor_sliders_config`): its label, default and UI
    range, and the values the preprocessor's math is defined for.

    The extension's API never range-checks a threshold (its UI slider range is only the UI's): canny takes 0, a
    tile_resample rate of 64 (webuiapi's default threshold) shrinks the picture 64 times. So a value in `accepts` runs
    even outside the slider; only a value the math cannot take (a blur sigma PIL crashes on) is refused.
    """

    label: str
    default: float
    minimum: float
    maximum: float
    accepts: tuple[float, float] = (0.0, math.inf)
    step: float | None = None  # the extension's slider step, where it sets one

    def api_json(self) -> dict:
        """The slider as the extension's `/controlnet/module_list` `module_detail` lists it."""
        entry = {"name": self.label, "value": self.default, "min": self.minimum, "max": self.maximum}
        return entry if self.step is None else {**entry, "step": self.step}


@dataclass(frozen=True)
class Preprocessor:
    """One way of turning an input picture into a control image.

    `run(image, threshold_a, threshold_b)` takes and returns an RGB PIL image. The thresholds are
    sd-webui-controlnet's two generic sliders (canny: low/high; threshold: level; blur: sigma);
    `threshold_a`/`threshold_b` describe them (`Slider`), None when unused. `takes_mask`: the unit's mask is part of
    the control (the extension's `accepts_mask`, its inpaint modules); for any other preprocessor a drawn mask stands
    in for the picture (`pipelines.controlnet.unit_mask`).
    """

    name: str
    run: Callable
    threshold_a: Slider | None = None
    threshold_b: Slider | None = None
    needs_weights: bool = False
    takes_mask: bool = False

    def resolve_thresholds(self, threshold_a: float | None, threshold_b: float | None) -> tuple[float | None, float | None]:
        """Fill in defaults and check values; raise ValueError naming the preprocessor, slider and value."""
        return (_resolve(self.name, "threshold_a", self.threshold_a, threshold_a),
                _resolve(self.name, "threshold_b", self.threshold_b, threshold_b))


def _resolve(name: str, field: str, slider: Slider | None, value):
    if slider is None or value is None:
        return None if slider is None else slider.default
    low, high = slider.accepts
    if not is_finite_number(value) or not low <= value <= high:
        accepted = f"a number >= {low}" if high == math.inf else f"a number in [{low}, {high}]"
        raise ValueError(f"Preprocessor {name!r}: {field} ({slider.label!r}, slider {slider.minimum}-{slider.maximum}, "
                         f"default {slider.default}) must be {accepted}, got {value!r}; "
                         "send a value in that range, or None (the API's -1) for the default.")
    return value


PREPROCESSORS: Registry[Preprocessor] = Registry("preprocessor")


def register_preprocessor(preprocessor: Preprocessor) -> Preprocessor:
    return PREPROCESSORS.register(preprocessor.name, preprocessor)


# sd-webui-controlnet modules that cannot run here, and why: named in the error instead of "unknown preprocessor".
UNAVAILABLE_PREPROCESSORS = {
    "inpaint_only+lama": "it fills the masked area with the LaMa inpainting model (big-lama weights, the extension's "
                         "annotator/lama) before the ControlNet sees it, and mixkit has no LaMa model to run; use "
                         "'inpaint_only' (same ControlNet, masked area left for the diffusion model to fill)",
}


def get_preprocessor(name: str) -> Preprocessor:
    """The registered preprocessor; a ValueError naming what is missing for a known module that cannot run here."""
    if isinstance(name, str) and name.lower() in UNAVAILABLE_PREPROCESSORS:
        raise ValueError(f"Preprocessor {name!r} is not available: {UNAVAILABLE_PREPROCESSORS[name.lower()]}.")
    return PREPROCESSORS.get(name)


def run_preprocessor(name: str, image, threshold_a: float | None = None, threshold_b: float | None = None):
    """Turn `image` (PIL) into a control image with the named preprocessor (RGB PIL image out)."""
    from PIL import Image

    preprocessor = get_preprocessor(name)
    if not isinstance(image, Image.Image):
        raise TypeError(f"Preprocessor {name!r} needs a PIL image, got {type(image).__name__}.")
    a, b = preprocessor.resolve_thresholds(threshold_a, threshold_b)
    return preprocessor.run(image.convert("RGB"), a, b).convert("RGB")
