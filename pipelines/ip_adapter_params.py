"""The IP-Adapter fields every IP-Adapter params class shares (txt2img, img2img, with or without ControlNet units).

One dataclass mixin holds them and one method checks them, so a new field (masks, precomputed embeddings) is added
once and the pipelines never repeat the argument list. Put it *before* the base params class,
`class P(IPAdapterFields, Txt2ImgParams)`: dataclass fields are ordered base-first, so positional arguments still
fill the base's fields (`P("a cat")` sets the prompt, not `ip_adapter`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Union

from pipelines.ip_adapter_files import IPAdapterSource
from pipelines.ip_adapter_inputs import IPAdapterCall, check_ip_adapter_inputs

# One adapter: a weights file, folder or hub id, an IPAdapterSource or its dict; or a list of them
IPAdapterSpec = Union[str, os.PathLike, IPAdapterSource, dict, list, tuple, None]


@dataclass
class IPAdapterFields:
    """The IP-Adapter part of a call; `ip_adapter_call()` is its one check."""

    # One adapter or a list of them; None: the ones `load_ip_adapter` set, if any
    ip_adapter: IPAdapterSpec = None
    # One PIL image or a list (several images for one adapter); with several adapters one entry per adapter, None
    # for an adapter fed by `ip_adapter_image_embeds`
    ip_adapter_image: Any = None
    # A number in [0, 2] for every adapter, or one per adapter; None: `set_ip_adapter_scale`'s, else 1.0 (diffusers)
    ip_adapter_scale: Any = None
    # (start, end) fractions of the steps the adapters act in, or one pair per adapter; None: every step.
    # sd-webui-controlnet's guidance_start/end: outside its window an adapter's scale is 0 (diffusers skips it)
    ip_adapter_guidance: Any = None
    # diffusers' `ip_adapter_image_embeds`: one entry per adapter, a tensor [2, images, ...] (negative half first,
    # as `encode_ip_adapter_image` returns) or None for an adapter fed by `ip_adapter_image`
    ip_adapter_image_embeds: Any = None
    # diffusers' IP-Adapter attention masks: per adapter None (whole picture) or one grayscale PIL mask per image of
    # that adapter (white: the reference acts there), in the output's aspect ratio (a hires fix's: the first pass's,
    # its second pass cuts them as it cuts the picture)
    ip_adapter_mask: Any = None

    def ip_adapter_call(self) -> IPAdapterCall | None:
        """The checked IP-Adapter part of the call, or None without adapters; raises naming the bad value."""
        return check_ip_adapter_inputs(self.ip_adapter, self.ip_adapter_image, self.ip_adapter_scale,
                                       self.ip_adapter_guidance, ip_adapter_image_embeds=self.ip_adapter_image_embeds,
                                       ip_adapter_mask=self.ip_adapter_mask)
