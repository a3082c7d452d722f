"""The StyleGAN2 decoder's modulated convolution is the per-sample-weight convolution of the paper."""

import torch
from torch.nn import functional as F

from mixkit.models.face_restorers.stylegan2 import ModulatedConv2d


def _per_sample_weights(conv: ModulatedConv2d, x: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
    """The paper's formulation: one modulated (and demodulated) weight per sample, applied sample by sample."""
    outputs = []
    for sample, code in zip(x, style):
        weight = conv.weight[0] * conv.modulation(code)[None, :, None, None]
        if conv.demodulate:
            weight = weight / (weight.square().sum(dim=(1, 2, 3), keepdim=True) + conv.eps).sqrt()
        if conv.upsample:
            sample = F.interpolate(sample[None], scale_factor=2, mode="bilinear", align_corners=False)[0]
        outputs.append(F.conv2d(sample[None], weight, padding=weight.shape[-1] // 2)[0])
    return torch.stack(outputs)


def test_modulated_conv_matches_per_sample_weights():
    torch.manual_seed(0)
    for demodulate, upsample, kernel in [(True, False, 3), (True, True, 3), (False, False, 1)]:
        conv = ModulatedConv2d(4, 5, kernel, 6, demodulate=demodulate, upsample=upsample)
        x, style = torch.randn(3, 4, 6, 6), torch.randn(3, 6)
        expected = _per_sample_weights(conv, x, style)
        assert torch.allclose(conv(x, style), expected, atol=1e-5), (demodulate, upsample)


def test_demodulated_outputs_have_unit_weight_norm():
    """With a constant unit input patch, demodulation makes each output's squared weight sum exactly 1."""
    torch.manual_seed(1)
    conv = ModulatedConv2d(3, 2, 1, 4, demodulate=True)
    x = torch.zeros(1, 3, 1, 1)
    style = torch.randn(1, 4)
    energies = torch.stack([conv(torch.eye(3)[i].view(1, 3, 1, 1) + x, style)[0, :, 0, 0] for i in range(3)])
    assert torch.allclose(energies.square().sum(dim=0), torch.ones(2), atol=1e-6)
