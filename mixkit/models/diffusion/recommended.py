"""A model's recommended generation settings (`mixkit_generation.json` beside `model_index.json`).

Civitai pages list the sampler, steps and CFG scale a checkpoint's makers found best; A1111 and
diffusers leave the user to copy them by hand, so a model tuned for CFG 5 is run at 7. A model
folder may carry them in `mixkit_generation.json`, e.g. `{"cfg_scale": 5.0, "note": "judge: 86% vs 81%"}`;
a setting the caller does not pass comes from there, then from A1111's defaults. Settings passed
explicitly always win, and the infotext records what was used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

from mixkit.io.json_object import read_json_object
from mixkit.finite_numbers import is_finite_number

RECOMMENDED_FILE = "mixkit_generation.json"
_NOT_GENERATION = ("note", "calibration_prompts")


@dataclass(frozen=True)
class RecommendedSettings:
    """None: the model recommends nothing for that setting."""

    sampler: str | None = None
    steps: int | None = None
    cfg_scale: float | None = None
    clip_skip: int | None = None  # A1111's "Clip skip": 2 for models trained on the penultimate layer
    note: str = ""  # why: what was measured (not used for generation)
    # Prompts from the model's own domain, for int8 calibration (pipelines.approx.int8); not a generation setting.
    calibration_prompts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.sampler is not None and (not isinstance(self.sampler, str) or not self.sampler.strip()):
            raise ValueError(f"sampler must be a WebUI sampler name, got {self.sampler!r}")
        if self.steps is not None and (isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1):
            raise ValueError(f"steps must be an integer >= 1, got {self.steps!r}")
        if self.cfg_scale is not None and (not is_finite_number(self.cfg_scale) or self.cfg_scale < 0):
            raise ValueError(f"cfg_scale must be a finite number >= 0, got {self.cfg_scale!r}")
        if self.clip_skip is not None and (isinstance(self.clip_skip, bool) or not isinstance(self.clip_skip, int)
                                           or self.clip_skip < 1):
            raise ValueError(f"clip_skip must be an integer >= 1, got {self.clip_skip!r}")
        if not isinstance(self.note, str):
            raise ValueError(f"note must be a string, got {self.note!r}")
        if isinstance(self.calibration_prompts, str) or not isinstance(self.calibration_prompts, (list, tuple)) or \
                not all(isinstance(p, str) and p.strip() for p in self.calibration_prompts):
            raise ValueError(f"calibration_prompts must be a list of non-empty strings, got {self.calibration_prompts!r}")
        object.__setattr__(self, "calibration_prompts", tuple(self.calibration_prompts))

    def generation_values(self) -> dict:
        """{setting: value} for the settings the model recommends (the note left out)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in _NOT_GENERATION and getattr(self, f.name) is not None}

    def to_json(self) -> str:
        values = self.generation_values()
        if self.note:
            values["note"] = self.note
        if self.calibration_prompts:
            values["calibration_prompts"] = list(self.calibration_prompts)
        return json.dumps(values, indent=2) + "\n"


def read_recommended(folder: str | Path) -> RecommendedSettings:
    """The folder's recommended settings; none when it has no `mixkit_generation.json`."""
    path = Path(folder) / RECOMMENDED_FILE
    if not path.is_file():
        return RecommendedSettings()
    values = read_json_object(path, str(path), 'it holds settings such as {"cfg_scale": 5.0}; fix or delete it')
    known = [f.name for f in fields(RecommendedSettings)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"{path}: unknown setting(s) {unknown}; valid ones: {known}")
    try:
        return RecommendedSettings(**values)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
