"""GFPGANv1Clean: the official width formula, sizes checked, noise random or stored, fidelity weight ignored."""

import pytest
import torch

from mixkit.models.face_restorers.gfpgan import GFPGAN, GFPGANConfig
from mixkit.testing.tiny_face_restorers import TINY_GFPGAN, tiny_face_restorer


def test_official_formula_gives_gfpgan_v14_widths():
    config = GFPGANConfig.official(out_size=512, channel_multiplier=2, narrow=1)
    assert config.decoder_channels == (512, 512, 512, 512, 512, 256, 128, 64)
    assert config.unet_channels == (256, 256, 256, 256, 256, 128, 64, 32)
    assert config == GFPGANConfig()
    assert config.latent_count == 16  # 2 * log2(512) - 2
    with pytest.raises(ValueError, match="8 to 1024"):
        GFPGANConfig.official(out_size=2048)


def test_v14_parameter_count_is_the_released_files():
    """GFPGANv1.4.pth holds 86,444,252 values (its 348 MB); built on the meta device, nothing is allocated."""
    with torch.device("meta"):
        model = GFPGAN(GFPGANConfig())
    assert sum(parameter.numel() for parameter in model.parameters()) == 86_444_252


@pytest.mark.parametrize("sizes, message", [
    (dict(out_size=48), "power of two"),
    (dict(out_size=32, decoder_channels=(8, 8, 8), unet_channels=(4, 4, 4)), "needs 4 widths"),
    (dict(out_size=16, decoder_channels=(8, 8, 6), unet_channels=(4, 4, 4)), "twice the U-Net"),
])
def test_inconsistent_sizes_are_refused(sizes, message):
    with pytest.raises(ValueError, match=message):
        GFPGANConfig(**sizes)


def test_stored_noise_is_deterministic_and_random_noise_is_not():
    model = tiny_face_restorer(TINY_GFPGAN)
    faces = torch.rand(1, 3, 32, 32) * 2 - 1
    assert torch.equal(model(faces, randomize_noise=False), model(faces, randomize_noise=False))
    assert not torch.equal(model(faces), model(faces))


def test_weight_is_checked_but_does_not_change_the_output():
    model = tiny_face_restorer(TINY_GFPGAN)
    faces = torch.rand(2, 3, 32, 32) * 2 - 1
    assert torch.equal(model(faces, 0.0, randomize_noise=False), model(faces, 1.0, randomize_noise=False))
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        model(faces, 2.0)


@pytest.mark.parametrize("different_w, sft_half", [(False, True), (True, False)])
def test_shared_latent_and_full_sft_variants_run(different_w, sft_half):
    config = GFPGANConfig.official(out_size=16, channel_multiplier=1, narrow=1 / 32, style_dim=8, mlp_layers=1,
                                   different_w=different_w, sft_half=sft_half)
    model = tiny_face_restorer(config)
    assert model.final_linear.out_features == (config.latent_count if different_w else 1) * 8
    assert model.condition_scale[0][2].out_channels == (8 if sft_half else 16)
    out = model(torch.rand(2, 3, 16, 16) * 2 - 1, randomize_noise=False)
    assert out.shape == (2, 3, 16, 16) and out.abs().max() <= 1
