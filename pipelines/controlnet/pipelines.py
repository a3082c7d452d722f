"""Text-to-image and image-to-image (incl. inpainting) with ControlNets, through the `unet_extra` hook.

`ControlNetMixin` adds the `controlnets` parameter to any pipeline built on
`DiffusionPipelineBase`: it checks the units with the other inputs, preprocesses the control
images once per call, and hands the sampling loop a `unet_extra` callable per batch. The plain
pipelines stay untouched; an empty `controlnets` list gives exactly their result.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from PIL import Image

from pipelines.controlnet.infotext import controlnet_infotext
from pipelines.controlnet.inpaint_only import InpaintOnlyBlend, KeptPicture, latent_keep_share, restore_unmasked_pixels
from pipelines.controlnet.inpaint_unet import unit_inpaint_channels
from pipelines.controlnet.residuals import controlnet_unet_extra, prepare_control_images
from pipelines.controlnet.unit_mask import with_mask_resolved
from pipelines.controlnet.units import ControlNetLimits, check_controlnet_units
from pipelines.img2img import Img2ImgParams, ImageToImage
from pipelines.inpaint_mask import is_inpainting_unet
from pipelines.params import Txt2ImgParams
from pipelines.txt2img import TextToImage


# How an "only masked" crop is fitted to width x height: A1111's `images.resize_image(2, crop, width, height)`.
CROP_RESIZE_MODE = "resize and fill"


def only_masked_control_image(image, resize_mode: str, mask_size: tuple[int, int], box: tuple[int, int, int, int],
                               width: int, height: int):
    """A unit's picture for an inpaint "only masked" pass, as sd-webui-controlnet prepares it: first brought to the
    mask's (= init image's) size with the unit's resize mode, so a map of any size lines up with the init image,
    then cropped to the masked region, then fitted to width x height like the init image's crop (A1111's
    `images.resize_image(OUTER_FIT, ...)`: "resize and fill" with stretched edges, not the control-map fit)."""
    from pipelines.image_prep import resize_image

    at_mask_size = resize_image(image, *mask_size, resize_mode)
    return resize_image(at_mask_size.crop(box), width, height, CROP_RESIZE_MODE)


def img2img_mask_for_units(params, size: tuple[int, int]) -> np.ndarray:
    """img2img's inpaint mask as the extension hands it to inpaint units without image (its `prepare_mask`): at the
    init image's `size`, inverted with "inpaint not masked", rounded as the call says and blurred per axis."""
    from pipelines.img2img import mask_blurs
    from pipelines.inpaint_mask import blur_mask, prepare_mask

    mask = prepare_mask(params.mask, size, invert=params.inpainting_mask_invert, round=params.mask_round)
    return np.asarray(blur_mask(mask, *mask_blurs(params)).convert("L"))


@dataclass
class ControlTxt2ImgParams(Txt2ImgParams):
    controlnets: list = field(default_factory=list)  # ControlNetUnit, at most ControlNetLimits.max_units


@dataclass
class ControlImg2ImgParams(Img2ImgParams):
    controlnets: list = field(default_factory=list)


@dataclass
class _ControlState:
    base: Any  # the wrapped pipeline's own per-call state
    controls: list
    kept: list | None = None  # inpaint_only units' KeptPicture, made at the first batch
    inpaint_channels: Any = None  # a 9-channel UNet's extra input from the last inpaint unit, made at the first batch


class ControlNetMixin:
    """Put before a pipeline class: `class P(ControlNetMixin, TextToImage)`."""

    controlnet_limits = ControlNetLimits()

    def check_inputs(self, params) -> None:
        super().check_inputs(params)
        check_controlnet_units(params.controlnets, self.model.unet.config, self.controlnet_limits,
                               has_init_image=bool(getattr(params, "init_images", None)),
                               vae_scale_factor=self.model.vae_scale_factor)

    def _prepare(self, params) -> _ControlState:
        base = super()._prepare(params)
        init_images = getattr(params, "init_images", None)
        # The call inpaints when img2img kept its mask (one blank once blurred sends "only masked" to plain img2img,
        # as A1111 drops p.image_mask then): its inpaint_only units run as inpaint, and units without image take it.
        inpainting = getattr(base, "overlay_masks", None) is not None
        # A unit without image takes the init image resized the way ImageToImage resizes it (sd-webui-controlnet uses
        # p.resize_mode here), not by the unit's own mode: otherwise the control map is cropped or padded differently
        # from the picture being denoised.
        from pipelines.image_prep import normalize_init_image

        fallback = normalize_init_image(init_images[0]) if init_images else None  # the pixels img2img itself uses
        fallback_mode = getattr(params, "resize_mode", "just resize")
        # An inpaint unit without image takes the init image with the img2img mask as A1111 prepares it (the extension's
        # `prepare_mask`: at the init image's size, inverted and blurred as the call says).
        fallback_mask = img2img_mask_for_units(params, fallback.size) if inpainting and fallback is not None else None
        units = [with_mask_resolved(u) for u in params.controlnets]
        crop = getattr(base, "crop", None)
        if crop is not None:  # inpaint "only masked": every control image (and mask) is cropped as the init image is
            box = (crop.left, crop.top, crop.right, crop.bottom)

            def cropped(image, mode):
                return only_masked_control_image(image, mode, fallback.size, box, params.width, params.height)

            units = [u if u.image is None else
                     replace(u, image=cropped(u.image, u.resize_mode), resize_mode=CROP_RESIZE_MODE,
                             mask=None if u.mask is None else cropped(u.mask.convert("L"), u.resize_mode))
                     for u in units]
            if fallback_mask is not None:
                fallback_mask = np.asarray(cropped(Image.fromarray(fallback_mask), fallback_mode))
            fallback = cropped(fallback, fallback_mode)
            fallback_mode = CROP_RESIZE_MODE
        controls = prepare_control_images(units, params.width, params.height, fallback, fallback_mode, fallback_mask,
                                          inpainting=inpainting)
        return _ControlState(base, controls)

    def _start_batch(self, params, state: _ControlState, sampler, generators: list, first_image: int):
        start = super()._start_batch(params, state.base, sampler, generators, first_image)
        if state.controls:
            total = params.steps if start.steps is None else start.steps
            start.unet_extra = controlnet_unet_extra(state.controls, total, self._time_ids(params, len(generators)))
        inpaint_units = [control for control in state.controls if control.source_mask is not None]
        if inpaint_units and is_inpainting_unet(self.model.unet):  # the unit's mask and picture, not the call's
            if state.inpaint_channels is None:
                state.inpaint_channels = unit_inpaint_channels(self.model.vae, inpaint_units[-1],
                                                               self.model.vae_scale_factor)
            start.extra_channels = state.inpaint_channels.expand(len(generators), -1, -1, -1)
        kept = [control for control in state.controls if control.keeps_unmasked]
        if kept:  # inpaint_only; never with an img2img mask (its units run as inpaint), so the blend slot is free
            start.mask_blend = InpaintOnlyBlend(self._kept_pictures(state, kept),
                                                self.model.scheduler_config.get("prediction_type", "epsilon"))
        return start

    def _kept_pictures(self, state: _ControlState, kept: list) -> list:
        """inpaint_only's picture latents (encoded once per call, as the extension caches them) and keep shares."""
        from pipelines.image_prep import to_model_pixels
        from pipelines.vae_decode import encode_images

        if state.kept is None:
            device = self.model.device
            state.kept = [KeptPicture(encode_images(self.model.vae, to_model_pixels([control.image])).to(device),
                                      latent_keep_share(control.mask, control.unit.weight).to(device))
                          for control in kept]
        return state.kept

    def _hypernetwork_modules(self, state: _ControlState) -> tuple:
        # A1111's hypernetworks hijack every CrossAttention, the ControlNet's (sd-webui-controlnet's cldm) included
        models = {id(control.unit.model): control.unit.model for control in state.controls}
        return (*super()._hypernetwork_modules(state.base), *models.values())

    def _finish_call(self, state: _ControlState, result) -> None:
        super()._finish_call(state.base, result)

    def _finish_image(self, params, state: _ControlState, image, index: int):
        image = super()._finish_image(params, state.base, image, index)
        for control in state.controls:
            if control.keeps_unmasked:
                image = restore_unmasked_pixels(image, np.asarray(control.image), control.mask)
        return image

    def _infotext_extras(self, params) -> dict[str, Any]:
        size = (params.width, params.height)
        return {**super()._infotext_extras(params), **controlnet_infotext(params.controlnets, size)}


class ControlNetTextToImage(ControlNetMixin, TextToImage):
    """Text-to-image guided by ControlNets (SD 1.x/2.x and SDXL)."""

    params_class = ControlTxt2ImgParams


class ControlNetImageToImage(ControlNetMixin, ImageToImage):
    """img2img / inpainting guided by ControlNets; a unit without image uses the init image."""

    params_class = ControlImg2ImgParams
