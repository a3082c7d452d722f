"""Hires fix with IP-Adapter image prompts acting in both passes, as sd-webui-controlnet runs an IP-Adapter unit.

The extension hooks an IP-Adapter unit into the UNet's cross-attention once per job, with the image embeddings
computed at hook time (`PlugableIPAdapter.hook`), and its attention patch runs at every UNet call: the hires pass is
guided by the same embeddings (a unit's `hr_option` defaults to "Both"). Its guidance window is checked against the
running pass's own `current_sampling_percent` (step / that pass's steps), and its effective-region mask is resized
to each attention layer of whichever pass runs. Here:

- the first pass encodes the reference images (or takes `ip_adapter_image_embeds`) once for the whole job, every
  batch included, and the second pass reuses those embeddings: the image encoder runs once;
- each pass attaches the adapters for its own sampling and takes them off however it ends (`IPAdapterMixin`), so the
  UNet is as found between passes, after the job, and after an error or an interrupt;
- guidance windows count each pass's steps (the second pass's are `hr_second_pass_steps`, or `steps`);
- masks, drawn in the first pass's aspect ratio, are stretched over the upscaled picture and cut as its latents are
  (`ip_adapter_masks.hires_pass_masks`): with `hr_resize_x` and `hr_resize_y` both set the second pass is a crop of
  another aspect ratio, where the extension would stretch the mask instead;
- the infotext has the hires keys and the `IP-Adapter` keys.

`HiresFix` picks these passes when its params carry the IP-Adapter fields (`pipelines.hires.hires_passes`), with
ControlNet units too (`ControlIPAdapterHiresParams`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from pipelines.controlnet.hires import ControlFirstPass, ControlHiresParams, ControlSecondPass
from pipelines.hires import HiresParams, HiresSize, _FirstPass, _SecondPass
from pipelines.ip_adapter import IPAdapterImg2ImgParams, IPAdapterMixin
from pipelines.ip_adapter_controlnet import ControlIPAdapterImg2ImgParams
from pipelines.ip_adapter_inputs import IPAdapterCall
from pipelines.ip_adapter_params import IPAdapterFields


@dataclass
class IPAdapterHiresParams(IPAdapterFields, HiresParams):
    """Hires-fix parameters plus the IP-Adapter fields (`IPAdapterFields`); masks are drawn at the first pass's
    aspect ratio (`width` x `height`)."""


@dataclass
class ControlIPAdapterHiresParams(ControlHiresParams, IPAdapterHiresParams):
    """Hires-fix parameters with ControlNet units and IP-Adapters, both guiding both passes."""


def hires_params_class(controlnets: bool, ip_adapter: bool) -> type[HiresParams]:
    """The hires params class of a call with (or without) ControlNet units and IP-Adapters."""
    return {(False, False): HiresParams, (True, False): ControlHiresParams,
            (False, True): IPAdapterHiresParams, (True, True): ControlIPAdapterHiresParams}[bool(controlnets),
                                                                                            bool(ip_adapter)]


class _IPAdapterFirstPassMixin(IPAdapterMixin):
    """A first pass that encodes the image prompts once per job and hands them (and the masks) to the second pass."""

    # set by the first batch's `_prepare`; HiresFix makes one first-pass instance per job and calls it per batch
    ip_embeds_out: list | None = None
    ip_masks_out: list | None = None
    ip_mask_frame = "first pass"

    @classmethod
    def from_pipeline(cls, other, **kwargs: Any):
        """Share `other`'s loaded adapters, image encoders and `load_ip_adapter` defaults when it has them: the pass is
        part of `other`'s call, not a pipeline of its own."""
        pipe = super().from_pipeline(other, **kwargs)
        if isinstance(other, IPAdapterMixin):
            pipe.__dict__["_ip_adapter_state"] = other._ip_state()
        return pipe

    def _ip_embeds(self, call: IPAdapterCall) -> list:
        if self.ip_embeds_out is None:
            self.ip_embeds_out = super()._ip_embeds(call)
        return self.ip_embeds_out

    def _ip_masks(self, call: IPAdapterCall) -> list | None:
        self.ip_masks_out = super()._ip_masks(call)
        return self.ip_masks_out


class _IPAdapterSecondPassMixin(IPAdapterMixin):
    """A second pass guided by the first pass's embeddings, with its masks in this pass's frame."""

    params_with_adapters: type  # the img2img params class with the IP-Adapter fields (and units, if any)
    hires_size: HiresSize  # set on the per-call instance by HiresFix
    first_ip_embeds: list | None = None
    first_ip_masks: list | None = None

    @classmethod
    def pass_params(cls, params: IPAdapterHiresParams, **values: Any):
        """The second pass's params: the first pass's IP-Adapter fields, but no masks (this pass's come from the
        first's, cropped as the latents are: its frame may have another aspect ratio than the masks drawn)."""
        base = super().pass_params(params, **values)
        adapters = {f.name: getattr(params, f.name) for f in fields(IPAdapterFields)}
        adapters["ip_adapter_mask"] = None
        return cls.params_with_adapters(**{f.name: getattr(base, f.name) for f in fields(base)}, **adapters)

    def follow(self, first_pass: _IPAdapterFirstPassMixin) -> None:
        super().follow(first_pass)
        self.__dict__["_ip_adapter_state"] = first_pass._ip_state()  # the adapters the first pass read, not again
        self.first_ip_embeds = first_pass.ip_embeds_out
        self.first_ip_masks = first_pass.ip_masks_out

    def _ip_embeds(self, call: IPAdapterCall) -> list:
        return self.first_ip_embeds

    def _ip_masks(self, call: IPAdapterCall) -> list | None:
        if self.first_ip_masks is None:
            return None
        from pipelines.ip_adapter_masks import hires_pass_masks

        return hires_pass_masks(self.first_ip_masks, self.hires_size.grid, self.hires_size.crop)


class IPAdapterFirstPass(_IPAdapterFirstPassMixin, _FirstPass):
    """The hires fix's first pass with image prompts."""


class IPAdapterSecondPass(_IPAdapterSecondPassMixin, _SecondPass):
    """The hires fix's second pass with the first pass's image prompts."""

    params_with_adapters = IPAdapterImg2ImgParams


class ControlIPAdapterFirstPass(_IPAdapterFirstPassMixin, ControlFirstPass):
    """The first pass with ControlNet units and image prompts (IP-Adapter outermost, as in
    `ControlNetIPAdapterTextToImage`)."""


class ControlIPAdapterSecondPass(_IPAdapterSecondPassMixin, ControlSecondPass):
    """The second pass with the first pass's controls and image prompts."""

    params_with_adapters = ControlIPAdapterImg2ImgParams


def ip_adapter_hires_passes(controlnets: bool) -> tuple[type, type]:
    """The two pass pipelines of a hires fix with IP-Adapters (and ControlNet units when `controlnets`)."""
    if controlnets:
        return ControlIPAdapterFirstPass, ControlIPAdapterSecondPass
    return IPAdapterFirstPass, IPAdapterSecondPass
