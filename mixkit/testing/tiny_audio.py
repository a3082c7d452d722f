"""A tiny AudioLDM (diffusers' `AudioLDMPipeline` layout) built from configs, for tests.

Sizes follow diffusers' own AudioLDM tests (tests/pipelines/audioldm): a CLAP text encoder with projection, a
two-level UNet2DConditionModel conditioned through its class embedding, a one-channel AutoencoderKL over mel
spectrograms and a SpeechT5 HiFi-GAN vocoder. The vocoder keeps AudioLDM's 16 kHz sampling rate; its upsampling
(2 x 2 = 4 samples per mel frame, AudioLDM's is 160) is small so a 0.02 s clip is a handful of frames.
"""

from __future__ import annotations

import json
from pathlib import Path

SAMPLE_RATE = 16000  # AudioLDM's


def write_tiny_roberta_tokenizer(folder: str | Path) -> Path:
    """Write a byte-level RoBERTa tokenizer (CLAP's tokenizer class, no merges): every byte is a token, offline."""
    from transformers import RobertaTokenizer

    from mixkit.testing.tiny_models import _bytes_to_unicode

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {token: index for index, token in enumerate(("<s>", "<pad>", "</s>", "<unk>"))}
    vocab.update({symbol: index + 4 for index, symbol in enumerate(_bytes_to_unicode().values())})
    vocab["<mask>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    tokenizer = RobertaTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), model_max_length=77)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_audioldm(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny `AudioLDMPipeline` folder (CLAP text encoder, UNet, mel VAE, HiFi-GAN vocoder, DDIM scheduler)."""
    import tempfile

    import torch
    from diffusers import AudioLDMPipeline, AutoencoderKL, DDIMScheduler, UNet2DConditionModel
    from transformers import (ClapTextConfig, ClapTextModelWithProjection, RobertaTokenizer, SpeechT5HifiGan,
                              SpeechT5HifiGanConfig)

    folder = Path(folder)
    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        block_out_channels=(8, 16), layers_per_block=1, sample_size=8, in_channels=4, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=(8, 16), class_embed_type="simple_projection", projection_class_embeddings_input_dim=32,
        class_embeddings_concat=True, norm_num_groups=4, attention_head_dim=4,
    ).eval()
    torch.manual_seed(seed + 1)
    vae = AutoencoderKL(block_out_channels=[8, 16], in_channels=1, out_channels=1, norm_num_groups=4,
                        down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
                        latent_channels=4, layers_per_block=1).eval()
    torch.manual_seed(seed + 2)
    text_encoder = ClapTextModelWithProjection(ClapTextConfig(
        bos_token_id=0, eos_token_id=2, hidden_size=32, intermediate_size=37, layer_norm_eps=1e-05,
        num_attention_heads=4, num_hidden_layers=2, pad_token_id=1, vocab_size=300, projection_dim=32,
        max_position_embeddings=80)).eval()
    torch.manual_seed(seed + 3)
    vocoder = SpeechT5HifiGan(SpeechT5HifiGanConfig(
        model_in_dim=8, sampling_rate=SAMPLE_RATE, upsample_initial_channel=16, upsample_rates=[2, 2],
        upsample_kernel_sizes=[4, 4], resblock_kernel_sizes=[3, 7], resblock_dilation_sizes=[[1, 3, 5], [1, 3, 5]],
        normalize_before=False)).eval()
    # cvssp/audioldm's scheduler config: DDIM on SD-like scaled-linear betas, epsilon prediction
    scheduler = DDIMScheduler(beta_start=0.0015, beta_end=0.0195, beta_schedule="scaled_linear", clip_sample=False,
                              set_alpha_to_one=False)
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer = RobertaTokenizer.from_pretrained(write_tiny_roberta_tokenizer(scratch))
    pipe = AudioLDMPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet, scheduler=scheduler,
                            vocoder=vocoder)
    pipe.save_pretrained(folder, safe_serialization=True)
    return folder
