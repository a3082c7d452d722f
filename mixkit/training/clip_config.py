"""Settings of a CLIP contrastive fine-tuning run, as a typed dataclass that round-trips to JSON."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mixkit.training.config_json import JsonConfig

MIXED_PRECISION = ("no", "bf16", "fp16")


@dataclass
class ClipTrainingConfig(JsonConfig):
    """`model` is a transformers CLIP folder (model + processor); `output` a folder written at the end."""

    model: str
    dataset: str
    output: str
    batch_size: int = 8
    max_steps: int = 100
    learning_rate: float = 1e-5
    weight_decay: float = 0.1
    seed: int = 0
    missing_captions: str = "folder_name"
    mixed_precision: str = "no"
    checkpoint_every: int = 0
    checkpoint_dir: str | None = None
    resume_from: str | None = None

    def check(self) -> None:
        """Raise ValueError naming the first setting out of range."""
        for name in ("batch_size", "max_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("learning_rate", "weight_decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.learning_rate == 0:
            raise ValueError("learning_rate must be > 0, got 0")
        if self.mixed_precision not in MIXED_PRECISION:
            raise ValueError(f"mixed_precision must be one of {MIXED_PRECISION}, got {self.mixed_precision!r}")
        if self.checkpoint_every < 0:
            raise ValueError(f"checkpoint_every must be >= 0, got {self.checkpoint_every}")
