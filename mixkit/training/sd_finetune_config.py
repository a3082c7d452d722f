"""Settings of a full UNet fine-tune (or from-scratch training) of Stable Diffusion, JSON round-trip."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mixkit.training.config_json import JsonConfig

MIXED_PRECISION = ("no", "bf16", "fp16")


@dataclass
class SDFinetuneConfig(JsonConfig):
    """`model` must be a diffusers folder; `output` is a new folder holding the whole model with the trained UNet."""

    model: str
    dataset: str
    output: str
    from_scratch: bool = False
    use_ema: bool = True
    ema_decay: float = 0.9999
    resolution: int = 512
    bucketing: bool = False
    bucket_step: int = 64
    missing_captions: str = "folder_name"
    batch_size: int = 1
    gradient_accumulation_steps: int = 1
    max_steps: int = 100
    learning_rate: float = 1e-5
    warmup_steps: int = 0
    seed: int = 0
    noise_offset: float = 0.0
    min_snr_gamma: float | None = None
    mixed_precision: str = "no"
    gradient_checkpointing: bool = False
    checkpoint_every: int = 0
    checkpoint_dir: str | None = None
    resume_from: str | None = None

    def check(self) -> None:
        """Raise ValueError naming the first setting out of range."""
        for name in ("batch_size", "gradient_accumulation_steps", "max_steps", "resolution"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.resolution % 8:
            raise ValueError(f"resolution must be divisible by 8 (the VAE downsamples by 8), got {self.resolution}")
        for name in ("learning_rate", "noise_offset", "min_snr_gamma", "ema_decay"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if not self.ema_decay < 1:
            raise ValueError(f"ema_decay must be below 1 (0.9999 is usual), got {self.ema_decay!r}")
        if self.min_snr_gamma is not None and self.min_snr_gamma <= 0:
            raise ValueError(f"min_snr_gamma must be > 0 or None, got {self.min_snr_gamma!r}")
        if self.mixed_precision not in MIXED_PRECISION:
            raise ValueError(f"mixed_precision must be one of {MIXED_PRECISION}, got {self.mixed_precision!r}")
        if self.checkpoint_every < 0 or self.warmup_steps < 0:
            raise ValueError(f"checkpoint_every and warmup_steps must be >= 0, got {self.checkpoint_every}, {self.warmup_steps}")
