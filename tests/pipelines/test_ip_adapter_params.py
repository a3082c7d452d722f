"""The IP-Adapter fields every IP-Adapter params class shares, and their one check."""

from __future__ import annotations

import dataclasses

import pytest

from .ip_adapter_helpers import reference

IP_FIELDS = ["ip_adapter", "ip_adapter_image", "ip_adapter_scale", "ip_adapter_guidance", "ip_adapter_image_embeds",
             "ip_adapter_mask"]


def all_params_classes():
    from pipelines.ip_adapter import IPAdapterImg2ImgParams, IPAdapterTxt2ImgParams
    from pipelines.ip_adapter_controlnet import ControlIPAdapterImg2ImgParams, ControlIPAdapterTxt2ImgParams

    return [IPAdapterTxt2ImgParams, IPAdapterImg2ImgParams, ControlIPAdapterTxt2ImgParams,
            ControlIPAdapterImg2ImgParams]


def test_every_ip_adapter_params_class_has_the_shared_fields_after_its_base_fields():
    from pipelines.ip_adapter_params import IPAdapterFields

    for params_class in all_params_classes():
        assert issubclass(params_class, IPAdapterFields)
        names = [field.name for field in dataclasses.fields(params_class)]
        assert [name for name in names if name.startswith("ip_adapter")] == IP_FIELDS
        assert names[0] == "prompt"  # positional arguments still fill the base params first
        assert params_class("a cat").prompt == "a cat"


def test_the_one_check_normalises_and_refuses(adapter_file):
    from pipelines.ip_adapter import IPAdapterTxt2ImgParams

    call = IPAdapterTxt2ImgParams(ip_adapter=str(adapter_file), ip_adapter_image=reference(0), ip_adapter_scale=0.5,
                                  ip_adapter_guidance=(0.0, 0.5)).ip_adapter_call()
    assert call.scales == (0.5,) and call.windows == ((0.0, 0.5),) and call.image_counts == (1,)
    assert call.embeds == (None,) and call.masks == (None,) and call.encodes_images == (True,)
    assert IPAdapterTxt2ImgParams().ip_adapter_call() is None
    with pytest.raises(ValueError, match="ip_adapter_guidance was given without ip_adapter"):
        IPAdapterTxt2ImgParams(ip_adapter_guidance=(0, 1)).ip_adapter_call()
