"""A tiny text-to-video model (diffusers' `TextToVideoSDPipeline` layout) built from configs, for tests.

Sizes follow diffusers' own text-to-video tests (a two-level UNet3DConditionModel); the VAE and CLIP text encoder
are the tiny SD ones, so latents are 1/8 of the frame size as in ModelScope's damo-vilab/text-to-video-ms-1.7b.
"""

from __future__ import annotations

from pathlib import Path


def build_tiny_text_to_video(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny `TextToVideoSDPipeline` folder (UNet3D, AutoencoderKL, CLIP text encoder, DDIM scheduler)."""
    import torch
    from diffusers import DDIMScheduler, TextToVideoSDPipeline, UNet3DConditionModel

    from mixkit.testing.tiny_models import tiny_clip_tokenizer, tiny_text_encoder, tiny_vae

    folder = Path(folder)
    torch.manual_seed(seed)
    unet = UNet3DConditionModel(
        block_out_channels=(8, 16), layers_per_block=1, sample_size=8, in_channels=4, out_channels=4,
        down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"), up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"),
        cross_attention_dim=32, attention_head_dim=4, norm_num_groups=4,
    ).eval()
    # damo-vilab/text-to-video-ms-1.7b's scheduler config: SD's betas, DDIM, epsilon prediction
    scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                              set_alpha_to_one=False)
    pipe = TextToVideoSDPipeline(vae=tiny_vae(seed + 1), text_encoder=tiny_text_encoder(seed + 2),
                                 tokenizer=tiny_clip_tokenizer(), unet=unet, scheduler=scheduler)
    pipe.save_pretrained(folder, safe_serialization=True)
    return folder
