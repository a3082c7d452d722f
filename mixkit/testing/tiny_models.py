"""Tiny Stable Diffusion models built from configs, for tests, benchmarks of overhead and demos.

Real checkpoints cannot be downloaded everywhere (CI, air-gapped machines), so tests build these
models with fixed seeds, save them with `save_pretrained`, and load them back through the same
public loader a user calls. The weights are random: images are noise-like but fully deterministic.
Sizes follow diffusers' and transformers' own unit tests, which are known to work.
"""

from __future__ import annotations

import json
from pathlib import Path

# GPT-2/CLIP byte-to-unicode table: printable bytes map to themselves, the rest to 256+n.
def _bytes_to_unicode() -> dict[int, str]:
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars)))


def write_tiny_clip_tokenizer(folder: str | Path) -> Path:
    """Write a byte-level CLIP tokenizer (no merges): every byte is a token, offline."""
    from transformers import CLIPTokenizer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    symbols = list(_bytes_to_unicode().values())
    vocab = {s: i for i, s in enumerate(symbols)}
    vocab.update({s + "</w>": i + len(symbols) for i, s in enumerate(symbols)})
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    tokenizer = CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), model_max_length=77)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_clip_tokenizer():
    """The byte-level CLIP tokenizer of `write_tiny_clip_tokenizer`, loaded from a temporary folder that is then
    removed (a pipeline built with it saves its own copy)."""
    import tempfile

    from transformers import CLIPTokenizer

    with tempfile.TemporaryDirectory() as scratch:
        return CLIPTokenizer.from_pretrained(write_tiny_clip_tokenizer(scratch))


def tiny_text_encoder(seed: int, hidden_size: int = 32, projection: bool = False, eos_token_id: int = 513,
                      hidden_act: str = "quick_gelu"):
    import torch
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    config = CLIPTextConfig(
        hidden_size=hidden_size, intermediate_size=37, num_attention_heads=4, num_hidden_layers=5,
        vocab_size=1000, max_position_embeddings=77, projection_dim=hidden_size,
        bos_token_id=512, eos_token_id=eos_token_id, pad_token_id=eos_token_id, hidden_act=hidden_act,
    )
    torch.manual_seed(seed)
    cls = CLIPTextModelWithProjection if projection else CLIPTextModel
    return cls(config).eval()


def tiny_vae(seed: int):
    import torch
    from diffusers import AutoencoderKL

    torch.manual_seed(seed)
    # Four levels, like the real SD VAE, so latents are 1/8 of the image size as in production.
    return AutoencoderKL(
        block_out_channels=[8, 8, 16, 16], in_channels=3, out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4,
        latent_channels=4, norm_num_groups=4, sample_size=64, layers_per_block=1,
    ).eval()


def build_tiny_sd1(folder: str | Path, seed: int = 0, prediction_type: str = "epsilon", sd2: bool = False) -> Path:
    """Save a tiny SD 1.x-layout diffusers folder (cross-attention dim 32, 2 UNet levels).

    With `sd2=True` the folder has SD 2.x's markers instead: linear projections in the UNet's
    transformers and an OpenCLIP-style (gelu) text encoder; pair it with `prediction_type=
    "v_prediction"` for an SD 2.x 768-v style model.
    """
    import torch
    from diffusers import DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel

    folder = Path(folder)
    tokenizer = tiny_clip_tokenizer()
    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        block_out_channels=(32, 64), layers_per_block=1, sample_size=8, in_channels=4, out_channels=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32, norm_num_groups=8, attention_head_dim=(2, 4) if sd2 else 4,
        use_linear_projection=sd2,
    ).eval()
    scheduler = DDIMScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
        set_alpha_to_one=False, steps_offset=1, prediction_type=prediction_type,
    )
    pipe = StableDiffusionPipeline(
        unet=unet, vae=tiny_vae(seed + 1), tokenizer=tokenizer,
        text_encoder=tiny_text_encoder(seed + 2, hidden_act="gelu" if sd2 else "quick_gelu"),
        scheduler=scheduler, safety_checker=None, feature_extractor=None, requires_safety_checker=False,
    )
    pipe.save_pretrained(folder, safe_serialization=True)
    return folder


def build_tiny_sdxl(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny SDXL-layout diffusers folder (two text encoders, added time/text embeddings)."""
    import torch
    from diffusers import EulerDiscreteScheduler, StableDiffusionXLPipeline, UNet2DConditionModel

    folder = Path(folder)
    tokenizer = tiny_clip_tokenizer()
    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        block_out_channels=(32, 64), layers_per_block=1, sample_size=8, in_channels=4, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        attention_head_dim=(2, 4), use_linear_projection=True, addition_embed_type="text_time",
        addition_time_embed_dim=8, transformer_layers_per_block=(1, 2), projection_class_embeddings_input_dim=80,
        cross_attention_dim=64, norm_num_groups=8,
    ).eval()
    scheduler = EulerDiscreteScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", steps_offset=1,
        timestep_spacing="leading", interpolation_type="linear", use_karras_sigmas=False,
    )
    pipe = StableDiffusionXLPipeline(
        unet=unet, vae=tiny_vae(seed + 1),
        text_encoder=tiny_text_encoder(seed + 2), tokenizer=tokenizer,
        text_encoder_2=tiny_text_encoder(seed + 3, projection=True), tokenizer_2=tokenizer,
        scheduler=scheduler, force_zeros_for_empty_prompt=True,
    )
    pipe.save_pretrained(folder, safe_serialization=True)
    return folder


def build_tiny_sdxl_refiner(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny SDXL-refiner-layout diffusers folder, as diffusers' StableDiffusionXLImg2ImgPipeline writes one.

    Like stabilityai/stable-diffusion-xl-refiner-1.0: only text_encoder_2 (OpenCLIP-style, with projection), a
    UNet conditioned on it alone (cross-attention dim = its width) whose added embedding takes the pooled text
    plus five time ids (original size, crop, aesthetic score), and `requires_aesthetics_score` in the model index.
    Its VAE is `build_tiny_sdxl`'s architecture, so the two share a latent space as the real pair does.
    """
    import torch
    from diffusers import EulerDiscreteScheduler, StableDiffusionXLImg2ImgPipeline, UNet2DConditionModel

    folder = Path(folder)
    tokenizer = tiny_clip_tokenizer()
    torch.manual_seed(seed)
    text_width, time_embed_dim = 32, 8
    unet = UNet2DConditionModel(
        block_out_channels=(32, 64), layers_per_block=1, sample_size=8, in_channels=4, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        attention_head_dim=(2, 4), use_linear_projection=True, addition_embed_type="text_time",
        addition_time_embed_dim=time_embed_dim, transformer_layers_per_block=(1, 1),
        projection_class_embeddings_input_dim=text_width + 5 * time_embed_dim,
        cross_attention_dim=text_width, norm_num_groups=8,
    ).eval()
    scheduler = EulerDiscreteScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", steps_offset=1,
        timestep_spacing="leading", interpolation_type="linear", use_karras_sigmas=False,
    )
    pipe = StableDiffusionXLImg2ImgPipeline(
        unet=unet, vae=tiny_vae(seed + 1), text_encoder=None, tokenizer=None,
        text_encoder_2=tiny_text_encoder(seed + 3, hidden_size=text_width, projection=True), tokenizer_2=tokenizer,
        scheduler=scheduler, requires_aesthetics_score=True, force_zeros_for_empty_prompt=False,
    )
    pipe.save_pretrained(folder, safe_serialization=True)
    return folder
