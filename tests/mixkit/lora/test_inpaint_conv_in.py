"""A LoRA made for a 4-channel conv_in on a 9-channel inpainting UNet: its change is zero-padded, as A1111 does; on an
8-channel instruct-pix2pix UNet too (A1111 fails on that layer)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from mixkit.lora import LoraMismatchError, LoraRequest, apply_loras
from tests.mixkit.lora.conftest import TinyModel, assert_bit_identical, snapshot


@pytest.fixture(params=[9, 8], ids=["inpainting", "instruct-pix2pix"])
def inpaint(sd1, request) -> TinyModel:
    from diffusers import UNet2DConditionModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel.from_config({**sd1.unet.config, "in_channels": request.param}).eval()
    return TinyModel(unet, sd1.text_encoders)


@pytest.mark.parametrize("mode", ["merge", "runtime"])
def test_conv_in_change_is_zero_padded_to_the_unets_channels(tmp_path, inpaint, mode):
    conv = inpaint.unet.conv_in
    g = torch.Generator().manual_seed(1)
    down = torch.randn(2, 4, 3, 3, generator=g) * 0.1
    up = torch.randn(conv.out_channels, 2, 1, 1, generator=g) * 0.1
    path = tmp_path / "conv_in.safetensors"
    save_file({"lora_unet_conv_in.lora_down.weight": down, "lora_unet_conv_in.lora_up.weight": up,
               "lora_unet_conv_in.alpha": torch.tensor(1.0)}, str(path))
    expected = torch.zeros_like(conv.weight, dtype=torch.float64)
    expected[:, :4] = 0.7 * 0.5 * (up.double().flatten(1) @ down.double().flatten(1)).reshape(conv.out_channels, 4, 3, 3)
    before = snapshot(inpaint)
    x = torch.randn(1, conv.in_channels, 8, 8, generator=g)
    handle = apply_loras(inpaint.unet, inpaint.text_encoders, [LoraRequest(path, 0.7, 0.7)], mode=mode)
    with torch.no_grad():
        out = conv(x)
        reference = torch.nn.functional.conv2d(x.double(), conv.weight.double() if mode == "runtime" else
                                               before["unet.conv_in.weight"].double() + expected,
                                               conv.bias.double(), padding=1)
        if mode == "runtime":
            reference = reference + torch.nn.functional.conv2d(x.double(), expected, padding=1)
    assert torch.allclose(out.double(), reference, atol=1e-5)
    if mode == "merge":
        change = conv.weight.detach().double() - before["unet.conv_in.weight"].double()
        assert torch.allclose(change, expected, atol=1e-7)
        assert not torch.any(change[:, 4:])
    handle.remove()
    assert_bit_identical(inpaint, before)


def test_dora_on_an_inpainting_conv_in_is_refused(tmp_path, inpaint):
    conv = inpaint.unet.conv_in
    path = tmp_path / "conv_in_dora.safetensors"
    save_file({"lora_unet_conv_in.lora_down.weight": torch.ones(2, 4, 3, 3),
               "lora_unet_conv_in.lora_up.weight": torch.ones(conv.out_channels, 2, 1, 1),
               "lora_unet_conv_in.dora_scale": torch.ones(conv.out_channels, 1, 1, 1)}, str(path))
    before = snapshot(inpaint)
    with pytest.raises(LoraMismatchError, match="lora_unet_conv_in"):
        apply_loras(inpaint.unet, inpaint.text_encoders, [LoraRequest(path)])
    assert_bit_identical(inpaint, before)
