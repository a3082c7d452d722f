"""The subset of A1111's settings (`/sdapi/v1/options`) this server has, and which a client may change.

Paths (output folders) are set by the operator on the command line and are read-only over the
API: a network client choosing where the server writes files would be a path-traversal hole.
"""

from __future__ import annotations

import threading
from typing import Any


def _check_clip_skip(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 12:
        raise ValueError(f"CLIP_stop_at_last_layers must be an integer in [1, 12], got {value!r}.")
    return value


def _check_bool(name: str):
    def check(value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}.")
        return value
    return check


def _check_preview_every(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -1 <= value <= 1000:
        raise ValueError(f"show_progress_every_n_steps must be an integer in [-1, 1000], got {value!r}.")
    return value


SETTABLE = {
    "CLIP_stop_at_last_layers": _check_clip_skip,
    "samples_save": _check_bool("samples_save"),
    "live_previews_enable": _check_bool("live_previews_enable"),
    "show_progress_every_n_steps": _check_preview_every,
}
MODEL_KEY = "sd_model_checkpoint"
VAE_KEY = "sd_vae"  # like the model key, applied by the caller: it loads a file


class ServerOptions:
    """Current option values; `sd_model_checkpoint` is handled by the caller (it loads a model)."""

    def __init__(self, output_dir: str, preview_every: int) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, Any] = {
            "sd_vae": "Automatic",
            "samples_save": True,
            "samples_format": "png",
            "outdir_samples": output_dir,
            "outdir_txt2img_samples": output_dir,
            "outdir_img2img_samples": output_dir,
            "CLIP_stop_at_last_layers": 1,
            "live_previews_enable": preview_every > 0,
            "show_progress_every_n_steps": preview_every,
            "eta_noise_seed_delta": 0,
        }

    def snapshot(self, model_title: str | None) -> dict[str, Any]:
        with self._lock:
            values = dict(self._values)
        values[MODEL_KEY] = model_title
        return values

    def get(self, key: str) -> Any:
        with self._lock:
            return self._values[key]

    def check_update(self, changes: Any) -> dict[str, Any]:
        """Validated copies of the changes (model and VAE keys excluded); raises ValueError on any bad key/value."""
        if not isinstance(changes, dict):
            raise ValueError(f"The options body must be a JSON object, got {type(changes).__name__}.")
        checked = {}
        for key, value in changes.items():
            if key in (MODEL_KEY, VAE_KEY):
                continue
            if key not in SETTABLE:
                readonly = " (set by the server operator on the command line)" if key in self._values else ""
                raise ValueError(f"Option {key!r} cannot be set over the API{readonly}; settable: {sorted([MODEL_KEY, VAE_KEY, *SETTABLE])}.")
            checked[key] = SETTABLE[key](value)
        return checked

    def apply(self, checked: dict[str, Any]) -> None:
        with self._lock:
            self._values.update(checked)
