"""Text-to-image and image-to-image (incl. inpainting) with ControlNets, through the `unet_extra` hook.

`ControlNetMixin` adds the `controlnets` parameter to any pipeline built on
`DiffusionPipelineBase`: it checks the units with the other inputs, preprocesses the control
images once per call, and hands the sampling loop a `unet_extra` callable per batch. The plain
pipelines stay untouched; an empty `controlnets` list gives exactly their result.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pipelines.controlnet.infotext import controlnet_infotext
from pipelines.controlnet.residuals import controlnet_unet_extra, prepare_control_images
from pipelines.controlnet.units import ControlNetLimits, check_controlnet_units
from pipelines.img2img import Img2ImgParams, ImageToImage
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
        # A unit without image takes the init image resized the way ImageToImage resizes it (sd-webui-controlnet uses
        # p.resize_mode here), not by the unit's own mode: otherwise the control map is cropped or padded differently
        # from the picture being denoised.
        from pipelines.image_prep import normalize_init_image

        fallback = normalize_init_image(init_images[0]) if init_images else None  # the pixels img2img itself uses
        fallback_mode = getattr(params, "resize_mode", "just resize")
        crop = getattr(base, "crop", None)
        if crop is not None:  # inpaint "only masked": every control image is cropped as the init image is
            box = (crop.left, crop.top, crop.right, crop.bottom)
            units = [u if u.image is None else
                     replace(u, image=only_masked_control_image(u.image, u.resize_mode, fallback.size, box,
                                                                params.width, params.height),
                             resize_mode=CROP_RESIZE_MODE) for u in params.controlnets]
            fallback = only_masked_control_image(fallback, fallback_mode, fallback.size, box, params.width, params.height)
            fallback_mode = CROP_RESIZE_MODE
        else:
            units = params.controlnets
        controls = prepare_control_images(units, params.width, params.height, fallback, fallback_mode)
        return _ControlState(base, controls)

    def _start_batch(self, params, state: _ControlState, sampler, generators: list, first_image: int):
        start = super()._start_batch(params, state.base, sampler, generators, first_image)
        if state.controls:
            total = params.steps if start.steps is None else start.steps
            start.unet_extra = controlnet_unet_extra(state.controls, total, self._time_ids(params, len(generators)))
        return start

    def _finish_image(self, params, state: _ControlState, image, index: int):
        return super()._finish_image(params, state.base, image, index)

    def _infotext_extras(self, params) -> dict[str, Any]:
        size = (params.width, params.height)
        return {**super()._infotext_extras(params), **controlnet_infotext(params.controlnets, size)}


class ControlNetTextToImage(ControlNetMixin, TextToImage):
    """Text-to-image guided by ControlNets (SD 1.x/2.x and SDXL)."""

    params_class = ControlTxt2ImgParams


class ControlNetImageToImage(ControlNetMixin, ImageToImage):
    """img2img / inpainting guided by ControlNets; a unit without image uses the init image."""

    params_class = ControlImg2ImgParams
