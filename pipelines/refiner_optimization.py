"""Whether a refiner may finish the images of an optimised model: only if it runs optimised the same way.

The infotext's `Optimization:` label describes the base model (`optimize(pipe, ...)` records it there), and it
is written on every image. A refiner loaded from a path gets none of the optimisation (only the base model's
dtypes, read from modules whose `dtype` may be the compute one): with `low-memory` it would hold a full float32
UNet copy, with `fast` run without channels-last and fused QKV, on OpenVINO run eagerly on torch, while the
label names the preset for the whole image. So a refiner on an optimised model is
refused before any work, unless it is a loaded model optimised with the same preset, backend and options
(then the label is true for both halves). On OpenVINO that is refused too: the refiner's graphs are not known
to run behind the base model's sampler.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mixkit.models.diffusion import DiffusionModel
from mixkit.runtime.apply import applied_runtime


def check_refiner_optimization(base: DiffusionModel, refiner: Any) -> None:
    """ValueError, naming the base model's preset and backend, when `refiner` would not run as the label says."""
    runtime = applied_runtime(base)
    backend = base.extras.get("execution_backend") or (runtime.backend if runtime is not None else "torch")
    if (runtime is None or runtime.changed_nothing) and backend == "torch":
        return  # nothing is labelled: the base model is the loaded checkpoint as it is
    model = refiner if isinstance(refiner, DiffusionModel) else getattr(refiner, "model", None)
    if model is base or _is_the_base_checkpoint(base, refiner):
        return  # no refiner runs (A1111 has nothing to switch to)
    preset = runtime.preset if runtime is not None else "?"
    own = applied_runtime(model) if model is not None else None
    if backend == "torch" and own is not None and (own.preset, own.backend, own.config) == (
            runtime.preset, runtime.backend, runtime.config):
        return  # optimised the same way: the label holds for the refiner's steps too
    if backend == "torch":
        instead = (f"load the refiner yourself and optimise it the same way (refiner_pipe = TextToImage."
                   f"from_pretrained(path, **load_options_for({preset!r})); optimize(refiner_pipe, {preset!r}, "
                   "<the same options>)) and pass refiner=refiner_pipe, or ")
    else:
        instead = ""
    raise ValueError(f"refiner={_describe(refiner)} would run unoptimised while the infotext labels the image with "
                     f"this model's optimisation (preset {preset!r}, backend {backend!r}); {instead}load the base "
                     "model without optimize() to use a refiner, or generate without refiner=.")


def _is_the_base_checkpoint(base: DiffusionModel, refiner: Any) -> bool:
    """A refiner path naming the base model's own folder (see `RefinerRun._is_the_base_model`)."""
    if not isinstance(refiner, (str, os.PathLike)):
        return False
    given, own = Path(refiner), Path(base.source)
    return given.exists() and own.exists() and given.resolve() == own.resolve()


def _describe(refiner: Any) -> str:
    return repr(str(refiner)) if isinstance(refiner, (str, os.PathLike)) else type(refiner).__name__
