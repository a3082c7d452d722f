"""What one ControlNet contributes to a generation, and the checks run before anything starts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mixkit.finite_numbers import is_finite_number
from pipelines.controlnet.resolution import PROCESSOR_RES_RANGE
from pipelines.image_prep import check_resize_mode


@dataclass(frozen=True)
class ControlNetLimits:
    """Operator limits: every unit runs a UNet-sized encoder at each step, so their number is capped."""

    max_units: int = 4


@dataclass
class ControlNetUnit:
    """One ControlNet with its control image and schedule, as a unit of sd-webui-controlnet.

    `image` is the picture handed to `preprocessor`, brought to the generation size with
    `resize_mode` ("just resize", "crop and resize", "resize and fill") first. In img2img a unit
    without image uses the init image resized as img2img resizes it (`Img2ImgParams.resize_mode`,
    not the unit's), so the control map lines up with the picture being denoised, as in
    sd-webui-controlnet; the infotext still records the unit's own resize mode. The unit is active
    at sampling step s of S while `guidance_start <= s / S <= guidance_end` (sd-webui-controlnet's
    rule, s counted from 0 over the steps actually run). `guess_mode` follows diffusers: the
    ControlNet sees only the conditional rows and its residuals are scaled from 0.1 (shallow)
    to 1.0 (deepest), recorded as "Control Mode: ControlNet is more important". `soft_injection` is the
    extension's "My prompt is more important": every row (prompt and negative) keeps the control, each
    residual scaled by `weight * 0.825 ** (12 - i)` (i = 0 for the shallowest, 12 for the middle block).
    `mask` (PIL, the image's size, white = masked; its first channel is read) is the extension's unit mask: the
    inpaint preprocessors (`inpaint`, `inpaint_only`) make the control from image and mask, any other preprocessor
    takes a drawn (not blank) mask as its picture (`pipelines.controlnet.unit_mask`).
    """

    model: Any  # a loaded diffusers ControlNetModel (see `load_controlnet`)
    image: Any = None  # PIL image, or None in img2img to use the init image
    weight: float = 1.0
    guidance_start: float = 0.0
    guidance_end: float = 1.0
    guess_mode: bool = False
    soft_injection: bool = False  # control mode "My prompt is more important"
    resize_mode: str = "crop and resize"
    preprocessor: str = "none"
    threshold_a: float | None = None
    threshold_b: float | None = None
    model_name: str | None = None  # what the infotext calls the model; default: the folder/file it came from
    # sd-webui-controlnet's preprocessor resolution (pipelines.controlnet.resolution): pixel_perfect computes it from
    # the picture and the generation size; else processor_res; None (with pixel_perfect off) preprocesses the picture
    # once fitted to the generation size. Only preprocessors with a resolution (canny, threshold, ...) use either.
    pixel_perfect: bool = False
    processor_res: int | None = None
    mask: Any = None  # PIL image of the image's size, white = masked; None: no mask
    # sd-webui-controlnet's effective_region_mask (PIL, any size, first channel read): the unit's residuals are
    # multiplied by it, resized to each residual (pipelines.controlnet.region_mask); None: the control applies everywhere
    effective_region_mask: Any = None

    @property
    def display_name(self) -> str:
        if self.model_name:
            return self.model_name
        source = getattr(getattr(self.model, "config", None), "_name_or_path", None) or "controlnet"
        name = str(source).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
        stem, dot, extension = name.rpartition(".")
        return stem if dot and extension.lower() in ("safetensors", "pth", "pt", "ckpt", "bin") else name


INFOTEXT_RESERVED = ",:"  # the separators of sd-webui-controlnet's "Name: value, Name: value" unit text


def check_infotext_name(label: str, name: str) -> None:
    """Refuse a model name the ControlNet infotext cannot hold (it would be written after sampling)."""
    if any(c in name for c in INFOTEXT_RESERVED):
        raise ValueError(f"{label}: model name {name!r} contains ',' or ':', which the ControlNet infotext format "
                         "cannot hold; rename it (ControlNetUnit.model_name, or the model's file or folder).")


def _number(label: str, value: Any, low: float, high: float) -> None:
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(f"{label} must be a number in [{low}, {high}], got {value!r}.")


def check_weight(label: str, value: Any) -> None:
    """A unit's weight (diffusers' controlnet_conditioning_scale): any finite number >= 0, as sd-webui-controlnet's API
    takes it (its 0-2 is only the UI slider's range; tile and QR-code recipes go above 2)."""
    if not is_finite_number(value) or value < 0:
        raise ValueError(f"{label} must be a finite number >= 0 (1 is full strength; the UI slider runs 0-2), "
                         f"got {value!r}.")


def check_controlnet_units(units: Any, unet_config, limits: ControlNetLimits, *, has_init_image: bool,
                           vae_scale_factor: int = 8) -> None:
    """Raise ValueError/TypeError naming the unit and value; called before any model runs."""
    from PIL import Image

    from pipelines.controlnet.region_mask import check_region_mask
    from pipelines.controlnet.unit_mask import check_unit_mask
    from pipelines.preprocessors import get_preprocessor

    if not isinstance(units, (list, tuple)):
        raise TypeError(f"controlnets must be a list of ControlNetUnit, got {type(units).__name__}.")
    if len(units) > limits.max_units:
        raise ValueError(f"Got {len(units)} ControlNet units; the limit is {limits.max_units} "
                         "(ControlNetLimits.max_units). Remove some units or raise the limit.")
    for index, unit in enumerate(units):
        label = f"ControlNet {index}"
        if not isinstance(unit, ControlNetUnit):
            raise TypeError(f"{label} must be a ControlNetUnit, got {type(unit).__name__}.")
        config = getattr(unit.model, "config", None)
        if config is None or not hasattr(config, "conditioning_embedding_out_channels"):
            raise TypeError(f"{label}: model must be a loaded diffusers ControlNetModel (see load_controlnet), "
                            f"got {type(unit.model).__name__}.")
        if unit.model_name is not None and not isinstance(unit.model_name, str):
            raise TypeError(f"{label}: model_name must be a string or None, got {type(unit.model_name).__name__}.")
        check_infotext_name(label, unit.display_name)
        check_controlnet_matches_unet(config, unet_config, label, unit.display_name)
        # A ControlNet sees the plain latents (4 channels) next to any UNet, or all of an inpainting UNet's 9 when it
        # was made from one (diffusers' ControlNetModel.from_unet copies in_channels).
        if config.in_channels not in (4, unet_config.in_channels):
            raise ValueError(f"{label} ({unit.display_name}) takes {config.in_channels} input channels, but this model's "
                             f"UNet gives {unet_config.in_channels} (a ControlNet takes 4, or an inpainting UNet's 9 if "
                             "it was made from one); pick a ControlNet made for this kind of model.")
        # The ControlNet's conditioning embedding brings the image to the latent grid with stride-2 convolutions,
        # one fewer than its channel list; a different factor than the VAE's fails deep in diffusers.
        factor = 2 ** (len(config.conditioning_embedding_out_channels) - 1)
        if factor != vae_scale_factor:
            raise ValueError(f"{label} ({unit.display_name}) does not fit this model: its conditioning embedding "
                             f"downsamples images by {factor}, the model's VAE by {vae_scale_factor}; pick a ControlNet "
                             "made for this model family.")
        check_weight(f"{label} weight", unit.weight)
        _number(f"{label} guidance_start", unit.guidance_start, 0.0, 1.0)
        _number(f"{label} guidance_end", unit.guidance_end, 0.0, 1.0)
        if unit.guidance_start > unit.guidance_end:
            raise ValueError(f"{label}: guidance_start {unit.guidance_start} is after guidance_end {unit.guidance_end}.")
        if not isinstance(unit.guess_mode, bool):
            raise TypeError(f"{label}: guess_mode must be True or False, got {unit.guess_mode!r}.")
        if not isinstance(unit.soft_injection, bool):
            raise TypeError(f"{label}: soft_injection must be True or False, got {unit.soft_injection!r}.")
        if unit.guess_mode and unit.soft_injection:
            raise ValueError(f"{label}: guess_mode ('ControlNet is more important') and soft_injection ('My prompt is "
                             "more important') are two different control modes; set at most one of them.")
        check_resize_mode(unit.resize_mode)
        if not isinstance(unit.pixel_perfect, bool):
            raise TypeError(f"{label}: pixel_perfect must be True or False, got {unit.pixel_perfect!r}.")
        low, high = PROCESSOR_RES_RANGE
        res = unit.processor_res
        if res is not None and (isinstance(res, bool) or not isinstance(res, int) or not low <= res <= high):
            raise ValueError(f"{label}: processor_res must be an integer in [{low}, {high}] (sd-webui-controlnet's "
                             f"range), or None, got {unit.processor_res!r}.")
        preprocessor = get_preprocessor(unit.preprocessor)
        preprocessor.resolve_thresholds(unit.threshold_a, unit.threshold_b)
        if unit.image is None and not has_init_image:
            raise ValueError(f"{label} has no image; give the unit an image (only img2img falls back to the init image).")
        if unit.image is not None and not isinstance(unit.image, Image.Image):
            raise TypeError(f"{label}: image must be a PIL image or None, got {type(unit.image).__name__}.")
        check_unit_mask(label, unit.image, unit.mask)
        check_region_mask(label, unit.effective_region_mask)


def check_controlnet_matches_unet(controlnet_config, unet_config, label: str, name: str) -> None:
    """A ControlNet only fits the UNet family it was trained with: same text width and extra embeddings."""
    from pipelines.controlnet.family import family_of_config

    want = (unet_config.cross_attention_dim, unet_config.addition_embed_type, tuple(unet_config.block_out_channels))
    got = (controlnet_config.cross_attention_dim, controlnet_config.addition_embed_type,
           tuple(controlnet_config.block_out_channels))
    if want != got:
        made_for, model = family_of_config(controlnet_config).label, family_of_config(unet_config).label
        raise ValueError(
            f"{label} ({name}) does not fit this model: it is a ControlNet for {made_for} models and the model is "
            f"{model} (the ControlNet has cross-attention width {got[0]}, added embedding {got[1]!r} and blocks "
            f"{list(got[2])}, the model's UNet {want[0]}, {want[1]!r} and {list(want[2])}). "
            f"Pick a ControlNet made for {model} models."
        )
