"""IP-Adapter image prompts and ControlNet units in one call (sd-webui-controlnet runs both as units of one request).

The two mixins compose: `IPAdapterMixin` wraps the state and the `unet_extra` hook `ControlNetMixin` builds (the
ControlNets get the text embeddings, the UNet gets their residuals and the image embeddings), and each undoes its own
per-call changes. IP-Adapter is the outer mixin so its image tokens reach the UNet whatever the units add.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.controlnet.pipelines import (
    ControlImg2ImgParams, ControlNetImageToImage, ControlNetMixin, ControlNetTextToImage, ControlTxt2ImgParams,
)
from pipelines.img2img import ImageToImage, Img2ImgParams
from pipelines.ip_adapter import (
    IPAdapterImageToImage, IPAdapterImg2ImgParams, IPAdapterMixin, IPAdapterTextToImage, IPAdapterTxt2ImgParams,
)
from pipelines.params import Txt2ImgParams
from pipelines.txt2img import TextToImage


@dataclass
class ControlIPAdapterTxt2ImgParams(ControlTxt2ImgParams, IPAdapterTxt2ImgParams):
    pass


@dataclass
class ControlIPAdapterImg2ImgParams(ControlImg2ImgParams, IPAdapterImg2ImgParams):
    pass


class ControlNetIPAdapterTextToImage(IPAdapterMixin, ControlNetMixin, TextToImage):
    """Text-to-image guided by ControlNets and image prompts (IP-Adapter)."""

    params_class = ControlIPAdapterTxt2ImgParams


class ControlNetIPAdapterImageToImage(IPAdapterMixin, ControlNetMixin, ImageToImage):
    """img2img / inpainting guided by ControlNets and image prompts (IP-Adapter)."""

    params_class = ControlIPAdapterImg2ImgParams


# (params class, pipeline class) by task, then by (ControlNet units?, IP-Adapters?): one table, not if/elif chains
_CLASSES = {
    "txt2img": {(False, False): (Txt2ImgParams, TextToImage),
                (True, False): (ControlTxt2ImgParams, ControlNetTextToImage),
                (False, True): (IPAdapterTxt2ImgParams, IPAdapterTextToImage),
                (True, True): (ControlIPAdapterTxt2ImgParams, ControlNetIPAdapterTextToImage)},
    "img2img": {(False, False): (Img2ImgParams, ImageToImage),
                (True, False): (ControlImg2ImgParams, ControlNetImageToImage),
                (False, True): (IPAdapterImg2ImgParams, IPAdapterImageToImage),
                (True, True): (ControlIPAdapterImg2ImgParams, ControlNetIPAdapterImageToImage)},
}


def params_class_for(task: str, controlnets: bool, ip_adapter: bool):
    """The params class of a "txt2img" / "img2img" call with (or without) ControlNet units and IP-Adapters."""
    return _CLASSES[task][bool(controlnets), bool(ip_adapter)][0]


def pipeline_class_for(task: str, controlnets: bool, ip_adapter: bool):
    """The pipeline class running such a call (`from_pipeline` turns a loaded pipeline into it)."""
    return _CLASSES[task][bool(controlnets), bool(ip_adapter)][1]
