"""Tiny ControlNets, a 9-channel inpainting model and an x4 upscaler built from configs, for tests.

They mirror the tiny UNets of `mixkit.testing.tiny_models` (same block layout, channels and
cross-attention width), so they plug into those tiny pipelines exactly as real ControlNets plug
into real SD 1.x / SDXL checkpoints. A freshly initialised ControlNet has zero output
convolutions (the ControlNet paper's "zero convolutions") and would change nothing; the builders
re-initialise them with seeded noise so tests can see the ControlNet act.
"""

from __future__ import annotations

from pathlib import Path

from mixkit.testing.tiny_models import build_tiny_sd1, tiny_clip_tokenizer, tiny_text_encoder

# The control-image encoder must downsample like the VAE: 2**(len - 1), i.e. 8x for the tiny VAE's
# four levels (the real SD ControlNets use (16, 32, 96, 256) for the same 8x).
TINY_CONDITIONING_CHANNELS = (8, 8, 16, 16)


def tiny_controlnet(seed: int = 0, sdxl: bool = False):
    """A ControlNetModel matching `build_tiny_sd1` (or `build_tiny_sdxl` with `sdxl=True`)."""
    import torch
    from diffusers import ControlNetModel

    torch.manual_seed(seed)
    if sdxl:
        model = ControlNetModel(
            block_out_channels=(32, 64), layers_per_block=1, in_channels=4,
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), attention_head_dim=(2, 4),
            use_linear_projection=True, addition_embed_type="text_time", addition_time_embed_dim=8,
            transformer_layers_per_block=(1, 2), projection_class_embeddings_input_dim=80,
            cross_attention_dim=64, norm_num_groups=8, conditioning_embedding_out_channels=TINY_CONDITIONING_CHANNELS,
        )
    else:
        model = ControlNetModel(
            block_out_channels=(32, 64), layers_per_block=1, in_channels=4,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), cross_attention_dim=32,
            norm_num_groups=8, attention_head_dim=4, conditioning_embedding_out_channels=TINY_CONDITIONING_CHANNELS,
        )
    _wake_zero_convolutions(model, seed)
    return model.eval()


def _wake_zero_convolutions(model, seed: int) -> None:
    import torch

    generator = torch.Generator().manual_seed(seed + 100)
    zero_convs = [*model.controlnet_down_blocks, model.controlnet_mid_block, model.controlnet_cond_embedding.conv_out]
    with torch.no_grad():
        for conv in zero_convs:
            conv.weight.copy_(torch.randn(conv.weight.shape, generator=generator) * 0.3)
            conv.bias.copy_(torch.randn(conv.bias.shape, generator=generator) * 0.1)


def build_tiny_controlnet(folder: str | Path, seed: int = 0, sdxl: bool = False) -> Path:
    """Save a tiny ControlNet as a diffusers folder (config.json + safetensors)."""
    folder = Path(folder)
    tiny_controlnet(seed, sdxl=sdxl).save_pretrained(folder, safe_serialization=True)
    return folder


def build_tiny_sd1_inpaint(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny SD 1.x inpainting model: its UNet takes 9 channels (latents, mask, masked image)."""
    import shutil

    import torch
    from diffusers import UNet2DConditionModel

    folder = build_tiny_sd1(folder, seed=seed)
    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        block_out_channels=(32, 64), layers_per_block=1, sample_size=8, in_channels=9, out_channels=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32, norm_num_groups=8, attention_head_dim=4,
    ).eval()
    shutil.rmtree(folder / "unet")
    unet.save_pretrained(folder / "unet", safe_serialization=True)
    return folder


def build_tiny_x4_upscaler(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny `StableDiffusionUpscalePipeline` folder (7-channel UNet, 4x VAE, noise-level embedding)."""
    import torch
    from diffusers import (
        AutoencoderKL, DDIMScheduler, DDPMScheduler, StableDiffusionUpscalePipeline, UNet2DConditionModel,
    )

    folder = Path(folder)
    tokenizer = tiny_clip_tokenizer()
    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        block_out_channels=(16, 32), layers_per_block=1, sample_size=16, in_channels=7, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32, attention_head_dim=4, use_linear_projection=True, num_class_embeds=350,
        norm_num_groups=8,
    ).eval()
    torch.manual_seed(seed + 1)
    # Three levels: the x4 upscaler's latents are at the low-resolution image's size, decoded 4x larger.
    vae = AutoencoderKL(
        block_out_channels=[8, 8, 16], in_channels=3, out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * 3, up_block_types=["UpDecoderBlock2D"] * 3,
        latent_channels=4, norm_num_groups=4, scaling_factor=0.08333,
    ).eval()
    pipe = StableDiffusionUpscalePipeline(
        vae=vae, text_encoder=tiny_text_encoder(seed + 2), tokenizer=tokenizer, unet=unet,
        low_res_scheduler=DDPMScheduler(num_train_timesteps=1000, beta_schedule="scaled_linear"),
        scheduler=DDIMScheduler(beta_schedule="scaled_linear", prediction_type="v_prediction", clip_sample=False),
        max_noise_level=350,
    )
    pipe.save_pretrained(folder, safe_serialization=True)
    return folder
