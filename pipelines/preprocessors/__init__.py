"""ControlNet preprocessors: turn a picture into the control image a ControlNet was trained on.

Built in, without weights: none, canny, invert, threshold, monochrome, blur_gaussian, tile_resample,
lineart_standard, scribble_xdog, inpaint, inpaint_only (these two take the unit's mask). Depth (depth_anything,
depth_midas) runs transformers models from the local cache.
"""

from pipelines.preprocessors import builtin as _builtin  # noqa: F401  (registers the built-in entries)
from pipelines.preprocessors import depth as _depth  # noqa: F401
from pipelines.preprocessors import lines as _lines  # noqa: F401
from pipelines.preprocessors.canny import canny_edges
from pipelines.preprocessors.depth import DEPTH_MODELS, PreprocessorWeightsMissing
from pipelines.preprocessors.registry import (
    PREPROCESSORS, UNAVAILABLE_PREPROCESSORS, Preprocessor, Slider, get_preprocessor, register_preprocessor,
    run_preprocessor,
)

__all__ = [
    "DEPTH_MODELS", "PREPROCESSORS", "Preprocessor", "PreprocessorWeightsMissing", "Slider", "UNAVAILABLE_PREPROCESSORS",
    "canny_edges", "get_preprocessor", "register_preprocessor", "run_preprocessor",
]
