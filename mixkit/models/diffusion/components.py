"""The loaded parts of one Stable Diffusion model, independent of where they came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mixkit.models.diffusion.family import ModelFamily, describe
from mixkit.models.diffusion.recommended import RecommendedSettings


@dataclass
class DiffusionModel:
    """UNet, VAE, text encoder(s), tokenizer(s) and scheduler config of one SD 1.x/2.x/XL model.

    `text_encoders`/`tokenizers` have one entry for SD 1.x/2.x and two for SDXL (CLIP-L, then
    OpenCLIP-bigG with projection). `name` is what the infotext's `Model:` shows, `model_hash` its
    `Model hash:` (A1111's sha256 prefix of the weights file, or None when unknown).
    """

    unet: Any
    vae: Any
    text_encoders: list
    tokenizers: list
    scheduler_config: dict
    family: ModelFamily
    name: str
    source: str
    model_hash: str | None = None
    extras: dict = field(default_factory=dict)
    recommended: RecommendedSettings = field(default_factory=RecommendedSettings)  # the folder's mixkit_generation.json

    @property
    def prediction_type(self) -> str:
        return self.scheduler_config.get("prediction_type", "epsilon")

    @property
    def description(self) -> str:
        # A 9-channel UNet (latent + mask + masked-image latent) is an inpainting model, an 8-channel one (latent +
        # input-image latent) an instruct-pix2pix model (detect_keys).
        in_channels = getattr(getattr(self.unet, "config", None), "in_channels", 4)
        return describe(self.family, self.prediction_type, in_channels == 9, in_channels == 8)

    @property
    def vae_scale_factor(self) -> int:
        return 2 ** (len(self.vae.config.block_out_channels) - 1)

    @property
    def native_size(self) -> int:
        """The image side the model was trained at (UNet sample size x VAE downsampling), diffusers' default."""
        return int(self.unet.config.sample_size) * self.vae_scale_factor

    @property
    def dtype(self):
        return self.unet.dtype

    @property
    def device(self):
        return self.unet.device
