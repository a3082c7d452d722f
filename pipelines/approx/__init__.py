"""Approximate speed-ups (issue 8): opt-in, labelled, and each one removable.

- TAESD tiny VAE decode (`taesd.py`), DeepCache feature reuse (`deepcache.py`), token merging
  (`token_merging.py` math, `tome_unet.py` installation).
- int8 UNet graph on the OpenVINO backend (`int8.py`: calibration, `mixkit.runtime.openvino_int8`: NNCF).
- `approximate(pipe, taesd=..., deepcache=N, tome=r, int8=True)` installs them on a pipeline's model and
  labels its infotexts (`labels.py`); `remove_approximations(pipe)` undoes them.
"""

from pipelines.approx.apply import AUTO_TAESD, ApproximationReport, approximate, remove_approximations
from pipelines.approx.deepcache import DeepCacheSettings, apply_deepcache, deepcache_state, remove_deepcache
from pipelines.approx.int8 import DEFAULT_CALIBRATION_PROMPTS, Int8Calibration
from pipelines.approx.labels import OptimizationLabels, model_labels
from pipelines.approx.taesd import TAESD_VARIANTS, default_taesd_source, load_taesd, preview_images
from pipelines.approx.token_merging import TokenMerge, plan_token_merge
from pipelines.approx.tome_unet import TokenMergingSettings, apply_token_merging, remove_token_merging

__all__ = [
    "AUTO_TAESD", "ApproximationReport", "DEFAULT_CALIBRATION_PROMPTS", "DeepCacheSettings", "Int8Calibration",
    "OptimizationLabels", "TAESD_VARIANTS", "TokenMerge",
    "TokenMergingSettings", "apply_deepcache", "apply_token_merging", "approximate", "deepcache_state",
    "default_taesd_source", "load_taesd", "model_labels", "plan_token_merge", "preview_images", "remove_approximations",
    "remove_deepcache", "remove_token_merging",
]
