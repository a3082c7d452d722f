"""Every size is read back from the tensors; other networks are refused with what is supported."""

import pytest
import torch

from mixkit.models.face_restorers.codeformer import CodeFormer, CodeFormerConfig
from mixkit.models.face_restorers.gfpgan import GFPGAN, GFPGANConfig
from mixkit.models.face_restorers.layouts import UnknownFaceRestorerError, detect_face_restorer, unwrap_trainer_state
from mixkit.models.face_restorers.vqgan import VQGANSizes


def _meta_state(model_class, config):
    with torch.device("meta"):
        return model_class(config).state_dict()


@pytest.mark.parametrize("config", [
    GFPGANConfig(),  # GFPGANv1.3 / v1.4
    GFPGANConfig.official(out_size=1024, channel_multiplier=2, narrow=1),
    GFPGANConfig.official(out_size=256, channel_multiplier=1, narrow=0.5, style_dim=256, mlp_layers=4),
    GFPGANConfig.official(out_size=64, channel_multiplier=2, narrow=1 / 16, style_dim=16, different_w=False,
                          sft_half=False),
    GFPGANConfig(out_size=16, style_dim=4, mlp_layers=0, decoder_channels=(12, 10, 6), unet_channels=(3, 5, 3)),
])
def test_gfpgan_sizes_are_read_back(config):
    assert detect_face_restorer(_meta_state(GFPGAN, config)) == config


@pytest.mark.parametrize("config", [
    CodeFormerConfig(),  # codeformer.pth v0.1.0
    CodeFormerConfig(dim_embd=256, n_layers=4, codebook_size=512, connect_list=(16, 32, 64, 128, 256, 512)),
    CodeFormerConfig(connect_list=()),
    CodeFormerConfig(dim_embd=16, n_layers=1, codebook_size=8, connect_list=(32,),
                     vqgan=VQGANSizes(base_channels=32, channel_multipliers=(1, 2, 1), res_blocks=3,
                                      attn_resolutions=(64, 16), code_dim=4, image_size=64)),
])
def test_codeformer_sizes_are_read_back(config):
    assert detect_face_restorer(_meta_state(CodeFormer, config)) == config


def test_params_ema_is_preferred():
    assert unwrap_trainer_state({"params": {"a": 1}, "params_ema": {"b": 2}}) == ("params_ema", {"b": 2})
    assert unwrap_trainer_state({"params": {"a": 1}}) == ("params", {"a": 1})
    assert unwrap_trainer_state({"x": 1}) == ("", {"x": 1})


def test_original_gfpgan_v1_is_named_and_refused():
    """GFPGANv1.pth: StyleGAN2 layers with fused-leaky-ReLU biases and noise injection modules."""
    state = {"conv_body_first.0.weight": torch.zeros(1), "stylegan_decoder.style_convs.0.noise_injection.weight":
             torch.zeros(1), "stylegan_decoder.style_convs.0.activate.bias": torch.zeros(1)}
    with pytest.raises(UnknownFaceRestorerError, match="original GFPGANv1.*GFPGANv1.4.pth"):
        detect_face_restorer(state)


def test_vqgan_alone_is_named_and_refused():
    state = {key: value for key, value in _meta_state(CodeFormer, CodeFormerConfig()).items()
             if key.startswith(("encoder.", "generator.", "quantize."))}
    with pytest.raises(UnknownFaceRestorerError, match="VQGAN autoencoder alone.*codeformer.pth"):
        detect_face_restorer(state)


def test_other_networks_are_refused_listing_the_supported_ones():
    with pytest.raises(UnknownFaceRestorerError, match="GFPGANv1Clean.*CodeFormer"):
        detect_face_restorer({"model.0.weight": torch.zeros(1)})


def test_broken_codeformer_encoder_is_refused():
    state = dict(_meta_state(CodeFormer, CodeFormerConfig()))
    for key in [key for key in state if key.startswith("encoder.blocks.24.")]:
        del state[key]
    with pytest.raises(UnknownFaceRestorerError, match="not laid out as a VQGAN encoder"):
        detect_face_restorer(state)
