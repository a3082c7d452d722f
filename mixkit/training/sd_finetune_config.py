"""Settings of a full UNet fine-tune (or from-scratch training) of Stable Diffusion, JSON round-trip."""

from __future__ import annotations

from dataclasses import dataclass

from mixkit.training.config_checks import check_ema_decay
from mixkit.training.config_json import JsonConfig
from mixkit.training.sd_run_options import SDRunOptions


@dataclass
class SDFinetuneConfig(SDRunOptions, JsonConfig):
    """`model` must be a diffusers folder; `output` is a new folder holding the whole model with the trained UNet.

    Optimizer, validation images and TensorBoard options come from `SDRunOptions`.
    """

    model: str
    dataset: str
    output: str
    from_scratch: bool = False
    use_ema: bool = True
    ema_decay: float = 0.9999
    resolution: int = 512
    missing_captions: str = "folder_name"
    # kohya's caption_extension: `photo.png` is captioned by `photo<caption_extension>` (kohya's default: .caption)
    caption_extension: str = ".txt"
    batch_size: int = 1
    gradient_accumulation_steps: int = 1
    max_steps: int = 100
    learning_rate: float = 1e-5
    # Steps of linear warm-up, or (a float below 1) kohya's ratio of the run's steps: 0.1 warms up over the first 10%.
    warmup_steps: int | float = 0
    seed: int = 0
    min_snr_gamma: float | None = None
    mixed_precision: str = "no"
    gradient_checkpointing: bool = False
    checkpoint_every: int = 0
    checkpoint_dir: str | None = None
    resume_from: str | None = None

    def check(self) -> None:
        """Raise ValueError naming the first setting out of range."""
        self.check_sd_training()
        check_ema_decay(self)
