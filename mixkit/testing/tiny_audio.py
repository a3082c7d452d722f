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


def _tiny_clap_model(seed: int):
    """A CLAP text + audio model (what MusicLDM and AudioLDM 2 load as `text_encoder`): sizes of diffusers' tests."""
    import torch
    from transformers import ClapAudioConfig, ClapConfig, ClapModel, ClapTextConfig

    torch.manual_seed(seed)
    text = ClapTextConfig(bos_token_id=0, eos_token_id=2, hidden_size=16, intermediate_size=37, layer_norm_eps=1e-05,
                          num_attention_heads=2, num_hidden_layers=2, pad_token_id=1, vocab_size=300,
                          projection_dim=16, max_position_embeddings=80)
    audio = ClapAudioConfig(spec_size=64, window_size=4, num_mel_bins=64, intermediate_size=37, layer_norm_eps=1e-05,
                            depths=[2, 2], num_attention_heads=[2, 2], num_hidden_layers=2, hidden_size=192,
                            projection_dim=16, patch_size=2, patch_stride=2, patch_embed_input_channels=4)
    return ClapModel(ClapConfig(text_config=text.to_dict(), audio_config=audio.to_dict(), projection_dim=16)).eval()


def _tiny_vocoder(seed: int):
    import torch
    from transformers import SpeechT5HifiGan, SpeechT5HifiGanConfig

    torch.manual_seed(seed)
    return SpeechT5HifiGan(SpeechT5HifiGanConfig(
        model_in_dim=8, sampling_rate=SAMPLE_RATE, upsample_initial_channel=16, upsample_rates=[2, 2],
        upsample_kernel_sizes=[4, 4], resblock_kernel_sizes=[3, 7], resblock_dilation_sizes=[[1, 3, 5], [1, 3, 5]],
        normalize_before=False)).eval()


def _tiny_mel_vae(seed: int):
    import torch
    from diffusers import AutoencoderKL

    torch.manual_seed(seed)
    return AutoencoderKL(block_out_channels=[8, 16], in_channels=1, out_channels=1, norm_num_groups=4,
                         down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
                         latent_channels=4, layers_per_block=1).eval()


def _tiny_roberta_tokenizer():
    import tempfile

    from transformers import RobertaTokenizer

    with tempfile.TemporaryDirectory() as scratch:
        return RobertaTokenizer.from_pretrained(write_tiny_roberta_tokenizer(scratch))


def _ddim_scheduler():
    from diffusers import DDIMScheduler

    # the scheduler config cvssp/audioldm2 and ucsd-reach/musicldm ship: DDIM, scaled-linear betas, epsilon
    return DDIMScheduler(beta_start=0.0015, beta_end=0.0195, beta_schedule="scaled_linear", clip_sample=False,
                         set_alpha_to_one=False)


def build_tiny_musicldm(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny `MusicLDMPipeline` folder: AudioLDM's layout with a whole CLAP model (text and audio towers) as the
    text encoder and CLAP's feature extractor, as ucsd-reach/musicldm ships."""
    import torch
    from diffusers import MusicLDMPipeline, UNet2DConditionModel
    from transformers import ClapFeatureExtractor

    folder = Path(folder)
    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        block_out_channels=(8, 16), layers_per_block=1, sample_size=8, in_channels=4, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=(8, 16), class_embed_type="simple_projection", projection_class_embeddings_input_dim=16,
        class_embeddings_concat=True, norm_num_groups=4, attention_head_dim=4,
    ).eval()
    pipe = MusicLDMPipeline(vae=_tiny_mel_vae(seed + 1), text_encoder=_tiny_clap_model(seed + 2),
                            tokenizer=_tiny_roberta_tokenizer(), feature_extractor=ClapFeatureExtractor(),
                            unet=unet, scheduler=_ddim_scheduler(), vocoder=_tiny_vocoder(seed + 3))
    pipe.save_pretrained(folder, safe_serialization=True)
    return folder


def _tiny_t5_tokenizer():
    """A unigram T5 tokenizer over single characters (no sentencepiece file, offline)."""
    from transformers import T5Tokenizer

    from mixkit.testing.tiny_models import _bytes_to_unicode

    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -1.0)]
    pieces += [(symbol, -2.0) for symbol in _bytes_to_unicode().values() if symbol != "\u2581"]
    return T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=77)


def _tiny_vits_text_to_speech(seed: int, folder: Path):
    """(VitsModel, VitsTokenizer) of a text-to-speech AudioLDM 2 (anhnct/audioldm2_gigaspeech's layout): characters as
    phonemes, no phonemizer needed. 190 symbols: AudioLDM 2 writes id 182 at the first padding position."""
    import torch
    from transformers import VitsConfig, VitsModel, VitsTokenizer

    symbols = ["<pad>", "<unk>"] + [chr(code) for code in range(32, 32 + 188)]
    (folder / "vocab.json").write_text(json.dumps({symbol: index for index, symbol in enumerate(symbols)}),
                                       encoding="utf-8")
    tokenizer = VitsTokenizer(str(folder / "vocab.json"), phonemize=False, add_blank=False, model_max_length=32)
    torch.manual_seed(seed)
    config = VitsConfig(vocab_size=len(symbols), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        ffn_dim=16, flow_size=16, spectrogram_bins=9, upsample_initial_channel=16,
                        upsample_rates=[2, 2], upsample_kernel_sizes=[4, 4], resblock_kernel_sizes=[3],
                        resblock_dilation_sizes=[[1, 3]], prior_encoder_num_flows=1, posterior_encoder_num_wavenet_layers=1,
                        duration_predictor_num_flows=1, duration_predictor_filter_channels=16, depth_separable_num_layers=1)
    return VitsModel(config).eval(), tokenizer


def build_tiny_audioldm2(folder: str | Path, seed: int = 0, text_to_speech: bool = False) -> Path:
    """Save a tiny `AudioLDM2Pipeline` folder (sizes of diffusers' tests/pipelines/audioldm2): CLAP and Flan-T5 (or,
    for `text_to_speech`, a VITS text encoder reading `transcription`) projected into a GPT-2 whose generated states,
    with the T5 states, condition the two cross-attention streams of the AudioLDM 2 UNet."""
    import tempfile

    import torch
    from diffusers import AudioLDM2Pipeline, AudioLDM2ProjectionModel, AudioLDM2UNet2DConditionModel
    from transformers import ClapFeatureExtractor, GPT2Config, GPT2LMHeadModel, T5Config, T5EncoderModel

    folder = Path(folder)
    torch.manual_seed(seed)
    second_dim = 16 if text_to_speech else 32
    unet = AudioLDM2UNet2DConditionModel(
        block_out_channels=(8, 16), layers_per_block=1, sample_size=8, in_channels=4, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=([None, 16, second_dim], [None, 16, second_dim]), norm_num_groups=4, attention_head_dim=4,
    ).eval()
    with tempfile.TemporaryDirectory() as scratch:
        if text_to_speech:
            text_encoder_2, tokenizer_2 = _tiny_vits_text_to_speech(seed + 4, Path(scratch))
        else:
            torch.manual_seed(seed + 4)
            text_encoder_2 = T5EncoderModel(T5Config(vocab_size=300, d_model=32, d_ff=37, d_kv=8, num_heads=2,
                                                     num_layers=2)).eval()
            tokenizer_2 = _tiny_t5_tokenizer()
        torch.manual_seed(seed + 5)
        language_model = GPT2LMHeadModel(GPT2Config(n_embd=16, n_head=2, n_layer=2, vocab_size=300, n_ctx=99,
                                                    n_positions=99)).eval()
        language_model.config.max_new_tokens = 8  # what AudioLDM 2 generates when the call names no count
        torch.manual_seed(seed + 6)
        projection_model = AudioLDM2ProjectionModel(text_encoder_dim=16, text_encoder_1_dim=second_dim,
                                                    langauge_model_dim=16).eval()
        pipe = AudioLDM2Pipeline(
            vae=_tiny_mel_vae(seed + 1), text_encoder=_tiny_clap_model(seed + 2), text_encoder_2=text_encoder_2,
            projection_model=projection_model, language_model=language_model, tokenizer=_tiny_roberta_tokenizer(),
            tokenizer_2=tokenizer_2, feature_extractor=ClapFeatureExtractor(), unet=unet, scheduler=_ddim_scheduler(),
            vocoder=_tiny_vocoder(seed + 3))
        pipe.save_pretrained(folder, safe_serialization=True)
    return folder
