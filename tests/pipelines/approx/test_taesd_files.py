"""TAESD from madebyollin's original single files (A1111's models/VAE-approx/taesd_decoder.pth).

Oracle: the original layout, rebuilt here as plain `nn.Sequential`s (a Clamp, then convolutions and
residual blocks of 64 channels), with random weights saved the way the original files are; the loaded
`AutoencoderTiny` must decode (and encode) exactly as those modules do, up to diffusers' [-1, 1] range.
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from mixkit.models.diffusion import ModelFamily
from pipelines.approx.taesd import load_taesd
from pipelines.approx.taesd_files import diffusers_keys


def _conv(n_in, n_out, **kwargs):
    return nn.Conv2d(n_in, n_out, 3, padding=1, **kwargs)


class _Clamp(nn.Module):
    def forward(self, x):
        return torch.tanh(x / 3) * 3


class _Block(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.conv = nn.Sequential(_conv(n, n), nn.ReLU(), _conv(n, n), nn.ReLU(), _conv(n, n))
        self.skip = nn.Identity()
        self.fuse = nn.ReLU()

    def forward(self, x):
        return self.fuse(self.conv(x) + self.skip(x))


def original_decoder(latent_channels: int = 4) -> nn.Sequential:
    layers = [_Clamp(), _conv(latent_channels, 64), nn.ReLU()]
    for _ in range(3):
        layers += [_Block(64), _Block(64), _Block(64), nn.Upsample(scale_factor=2), _conv(64, 64, bias=False)]
    return nn.Sequential(*layers, _Block(64), _conv(64, 3))


def original_encoder(latent_channels: int = 4) -> nn.Sequential:
    layers = [_conv(3, 64), _Block(64)]
    for _ in range(3):
        layers += [_conv(64, 64, stride=2, bias=False), _Block(64), _Block(64), _Block(64)]
    return nn.Sequential(*layers, _conv(64, latent_channels))


def _randomised(module: nn.Module, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_(0, 0.05)
    return module.eval()


@pytest.mark.parametrize("suffix", [".pth", ".safetensors"])
def test_an_original_decoder_file_decodes_exactly_as_the_original_module(tmp_path, suffix):
    decoder = _randomised(original_decoder(), seed=1)
    path = tmp_path / f"taesd_decoder{suffix}"
    state = {k: v.contiguous() for k, v in decoder.state_dict().items()}
    torch.save(state, path) if suffix == ".pth" else save_file(state, path)
    taesd = load_taesd(path, ModelFamily.SD1)
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(2)) * 2
    with torch.no_grad():
        expected = decoder(latents) * 2 - 1  # the original decodes to [0, 1], diffusers to [-1, 1]
        ours = taesd.decode(latents).sample
    assert ours.shape == (1, 3, 64, 64)
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)
    assert taesd.mixkit_variant == "taesd" and taesd.mixkit_has_encoder is False


def test_a_sibling_encoder_file_is_loaded_too(tmp_path):
    decoder, encoder = _randomised(original_decoder(), 3), _randomised(original_encoder(), 4)
    torch.save(decoder.state_dict(), tmp_path / "taesdxl_decoder.pth")
    torch.save(encoder.state_dict(), tmp_path / "taesdxl_encoder.pth")
    taesd = load_taesd(tmp_path / "taesdxl_decoder.pth", ModelFamily.SDXL)
    image = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        torch.testing.assert_close(taesd.encode(image * 2 - 1).latents, encoder(image), rtol=1e-5, atol=1e-5)
    assert taesd.mixkit_has_encoder is True


def test_wrong_files_are_refused_with_what_to_pass_instead(tmp_path):
    torch.save(original_encoder().state_dict(), tmp_path / "taesd_encoder.pth")
    with pytest.raises(ValueError, match="pass the decoder file"):
        load_taesd(tmp_path / "taesd_encoder.pth", ModelFamily.SD1)
    torch.save(original_decoder().state_dict(), tmp_path / "taesdxl_decoder.pth")
    with pytest.raises(ValueError, match="taesd"):  # SDXL's TAESD on an SD 1.x model
        load_taesd(tmp_path / "taesdxl_decoder.pth", ModelFamily.SD1)
    broken = original_decoder().state_dict()
    broken["1.weight"] = torch.zeros(64, 4, 5, 5)
    torch.save(broken, tmp_path / "taesd_decoder.pth")
    with pytest.raises(ValueError, match="decoder.layers.0.weight"):
        load_taesd(tmp_path / "taesd_decoder.pth", ModelFamily.SD1)
    save_file({"decoder.conv_in.weight": torch.zeros(1)}, tmp_path / "other_taesd_decoder.safetensors")
    with pytest.raises(ValueError, match="not an original TAESD decoder"):
        load_taesd(tmp_path / "other_taesd_decoder.safetensors", ModelFamily.SD1)


def test_key_renaming_is_the_documented_shift():
    assert list(diffusers_keys({"1.weight": 0, "3.conv.0.bias": 0}, "decoder")) == [
        "decoder.layers.0.weight", "decoder.layers.2.conv.0.bias"]
    assert list(diffusers_keys({"0.weight": 0}, "encoder")) == ["encoder.layers.0.weight"]
    with pytest.raises(ValueError, match="not one of an original TAESD decoder"):
        diffusers_keys({"0.weight": 0}, "decoder")
