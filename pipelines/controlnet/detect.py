"""A control map on its own, as sd-webui-controlnet's "Run preprocessor" button and `/controlnet/detect` make it.

The map is detected the way a unit detects it before generation (`pipelines.controlnet.resolution`): the
preprocessors that have a resolution (canny, threshold, blur_gaussian, the depth estimators) see the picture scaled
so its short side is `processor_res`, and the map comes back at that scale, as the extension returns it; the others
(none, invert, monochrome, tile_resample) run on the picture as given. Nothing is fitted to a generation size: that
is the unit's resize mode's job once a size is known.
"""

from __future__ import annotations

from mixkit.finite_numbers import is_finite_number
from pipelines.controlnet.resolution import (
    DEFAULT_PROCESSOR_RES, PROCESSOR_RES_RANGE, detect_at_resolution, uses_resolution,
)


def check_detect_inputs(preprocessor: str, processor_res: int, threshold_a: float | None,
                        threshold_b: float | None) -> tuple[float | None, float | None]:
    """Refuse an unknown preprocessor, a resolution outside the extension's slider range or thresholds outside the
    preprocessor's own; returns the thresholds with the preprocessor's defaults filled in."""
    from pipelines.preprocessors import get_preprocessor

    entry = get_preprocessor(preprocessor)  # unknown names: the registry's error lists the valid ones
    low, high = PROCESSOR_RES_RANGE
    whole = isinstance(processor_res, int) and not isinstance(processor_res, bool)
    if not whole or not low <= processor_res <= high:
        raise ValueError(f"processor_res must be an integer in [{low}, {high}] (sd-webui-controlnet's slider range; "
                         f"its default is {DEFAULT_PROCESSOR_RES}), got {processor_res!r}.")
    for label, value in (("threshold_a", threshold_a), ("threshold_b", threshold_b)):
        if value is not None and not is_finite_number(value):
            raise ValueError(f"{label} must be a finite number or None (the preprocessor's default), got {value!r}.")
    return entry.resolve_thresholds(threshold_a, threshold_b)


def detect_control_map(image, preprocessor: str, *, processor_res: int = DEFAULT_PROCESSOR_RES,
                       threshold_a: float | None = None, threshold_b: float | None = None):
    """The control map of `image` (PIL) made by `preprocessor`, an RGB PIL image: at `processor_res` (short side)
    for the preprocessors that have a resolution, at the picture's own size for the others."""
    from PIL import Image

    from pipelines.preprocessors import run_preprocessor

    if not isinstance(image, Image.Image):
        raise TypeError(f"detect_control_map needs a PIL image, got {type(image).__name__}.")
    a, b = check_detect_inputs(preprocessor, processor_res, threshold_a, threshold_b)
    picture = image.convert("RGB")

    def run(source):
        return run_preprocessor(preprocessor, source, a, b)

    if uses_resolution(preprocessor):
        return detect_at_resolution(run, picture, processor_res)
    return run(picture)
