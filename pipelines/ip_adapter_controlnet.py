"""IP-Adapter image prompts and ControlNet units in one call (sd-webui-controlnet runs both as units of one request).

The two mixins compose: `IPAdapterMixin` wraps the state and the `unet_extra` hook `ControlNetMixin` builds (the
ControlNets get the text embeddings, the UNet gets their residuals and the image embeddings), and each undoes its own
per-call changes. IP-Adapter is the outer mixin so its image tokens reach the UNet whatever the units add.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.controlnet.pipelines import ControlImg2ImgParams, ControlNetMixin, ControlTxt2ImgParams
from pipelines.img2img import ImageToImage
from pipelines.ip_adapter import IPAdapterImg2ImgParams, IPAdapterMixin, IPAdapterTxt2ImgParams
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
