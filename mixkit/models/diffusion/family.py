"""Which Stable Diffusion family a model belongs to, decided from its configs.

The family decides conditioning (one or two text encoders, pooled embeddings, time ids), which
LoRA keys can match, and which single-file layout applies; so it is detected once, at load time,
from the configs rather than from file or folder names (which users rename freely).
"""

from __future__ import annotations

import enum
from typing import Any, Mapping


class ModelFamily(str, enum.Enum):
    SD1 = "sd1"
    SD2 = "sd2"
    SDXL = "sdxl"
    # SDXL's refiner: one text encoder (OpenCLIP bigG) and an aesthetic score instead of the target size in its
    # time ids. Made to run the last steps of an SDXL base image (A1111's "Refiner"), or img2img on its own.
    SDXL_REFINER = "sdxl_refiner"

    @property
    def label(self) -> str:
        return {"sd1": "SD 1.x", "sd2": "SD 2.x", "sdxl": "SDXL base", "sdxl_refiner": "SDXL refiner"}[self.value]

    @property
    def uses_pooled_text(self) -> bool:
        """Whether the UNet takes SDXL's pooled text embedding and time ids (`added_cond_kwargs`)."""
        return self in (ModelFamily.SDXL, ModelFamily.SDXL_REFINER)


def detect_family(unet_config: Mapping[str, Any], has_second_text_encoder: bool) -> ModelFamily:
    """Classify a UNet config: SDXL by its text-time embedding (the refiner: with one text encoder), SD 2.x by linear
    projections / 1024-d context."""
    if unet_config.get("addition_embed_type") == "text_time":
        # The refiner's folder has text_encoder_2 only (diffusers' StableDiffusionXLImg2ImgPipeline with
        # `text_encoder=None`); its single-file layout keeps OpenCLIP under `conditioner.embedders.0`.
        return ModelFamily.SDXL if has_second_text_encoder else ModelFamily.SDXL_REFINER
    if unet_config.get("use_linear_projection") or unet_config.get("cross_attention_dim") == 1024:
        return ModelFamily.SD2
    return ModelFamily.SD1


def describe(family: ModelFamily, prediction_type: str, inpainting: bool = False,
             instruct_pix2pix: bool = False) -> str:
    """Human-readable name, e.g. 'SD 2.x (v-prediction)', 'SD 2.x inpainting' or 'SD 1.x instruct-pix2pix'."""
    suffix = " (v-prediction)" if prediction_type == "v_prediction" else ""
    variant = " inpainting" if inpainting else " instruct-pix2pix" if instruct_pix2pix else ""
    return family.label + variant + suffix
