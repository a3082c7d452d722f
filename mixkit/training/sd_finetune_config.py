"""Settings of a full UNet fine-tune (or from-scratch training) of Stable Diffusion, JSON round-trip."""

from __future__ import annotations

from dataclasses import dataclass

from mixkit.training.config_checks import check_ema_decay
from mixkit.training.config_json import JsonConfig
from mixkit.training.sd_run_options import SDRunOptions


@dataclass
class SDFinetuneConfig(SDRunOptions, JsonConfig):
    """`model` must be a diffusers folder; `output` is a new folder holding the whole model with the trained UNet.

    Data, batch and step settings, optimizer, validation images and TensorBoard options come from `SDRunOptions`.
    """

    model: str
    dataset: str
    output: str
    from_scratch: bool = False
    use_ema: bool = True
    ema_decay: float = 0.9999
    learning_rate: float = 1e-5
    mixed_precision: str = "no"

    def check(self) -> None:
        """Raise ValueError naming the first setting out of range."""
        self.check_sd_training()
        check_ema_decay(self)
