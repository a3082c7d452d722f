"""ControlNet for SD 1.x/2.x and SDXL: units, loading, per-step residuals, infotext and pipelines."""

from pipelines.controlnet.hires import ControlHiresParams
from pipelines.controlnet.infotext import controlnet_infotext, controlnet_units_from_infotext, parse_unit, serialize_unit
from pipelines.controlnet.loading import controlnet_config_from_unet, load_controlnet
from pipelines.controlnet.pipelines import (
    ControlImg2ImgParams, ControlNetImageToImage, ControlNetMixin, ControlNetTextToImage, ControlTxt2ImgParams,
)
from pipelines.controlnet.residuals import controlnet_unet_extra, is_active, prepare_control_images, resize_controls
from pipelines.controlnet.units import ControlNetLimits, ControlNetUnit, check_controlnet_units

__all__ = [
    "ControlHiresParams", "ControlImg2ImgParams", "ControlNetImageToImage", "ControlNetLimits", "ControlNetMixin",
    "ControlNetTextToImage", "ControlNetUnit", "ControlTxt2ImgParams", "check_controlnet_units", "controlnet_config_from_unet",
    "controlnet_infotext", "controlnet_unet_extra", "controlnet_units_from_infotext", "is_active", "load_controlnet",
    "parse_unit", "prepare_control_images", "resize_controls", "serialize_unit",
]
