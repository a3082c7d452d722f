"""`pipelines.text_to_audio.TextToAudio` on a tiny AudioLDM saved to a folder; diffusers' `AudioLDMPipeline` is the
oracle (the same generator gives the same waveform)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipelines.control import GenerationControl
from pipelines.text_to_audio import TextToAudio, check_audio_settings


@pytest.fixture(scope="module")
def model(tiny_audioldm_dir):
    return TextToAudio.from_pretrained(str(tiny_audioldm_dir))


def test_the_waveform_equals_diffusers_for_the_same_seed(model, tiny_audioldm_dir):
    from diffusers import AudioLDMPipeline

    pipe = AudioLDMPipeline.from_pretrained(str(tiny_audioldm_dir))
    pipe.set_progress_bar_config(disable=True)
    expected = pipe("rain on a roof", negative_prompt="noise", audio_length_in_s=0.02, num_inference_steps=3,
                    guidance_scale=2.5, generator=torch.Generator().manual_seed(7)).audios[0]
    result = model("rain on a roof", negative_prompt="noise", audio_length_in_s=0.02, steps=3, seed=7)
    assert result.seed == 7 and result.sample_rate == 16000 and not result.interrupted
    assert result.waveform.dtype == np.float32 and result.waveform.shape == expected.shape == (320,)
    np.testing.assert_allclose(result.waveform, expected, rtol=0, atol=1e-7)


@pytest.mark.parametrize("seconds, samples", [
    (0.02, 320),  # 80 mel frames of 4 samples, a whole number of latent rows
    (0.0205, 328),  # 82 frames, rounded up to 84 for the VAE, the waveform cut back to int(0.0205 x 16000)
    (0.013, 208),
    (0.020125, 322),  # 80.5 frames: 82 (diffusers truncates to 80, a whole number of rows, and gives 320 samples)
    (None, 64),  # the native length: UNet sample size 8 x VAE factor 2 x 4 samples
])
def test_the_length_is_seconds_times_the_rate(model, seconds, samples):
    assert model(prompt="a drum", audio_length_in_s=seconds, steps=1, seed=0).waveform.shape == (samples,)


def test_a_length_diffusers_cuts_short_comes_out_full(model, tiny_audioldm_dir):
    from diffusers import AudioLDMPipeline

    pipe = AudioLDMPipeline.from_pretrained(str(tiny_audioldm_dir))
    pipe.set_progress_bar_config(disable=True)
    short = pipe("a drum", audio_length_in_s=0.020125, num_inference_steps=1).audios[0]
    assert short.shape == (320,)  # diffusers: 2 samples short of int(0.020125 x 16000)
    assert model("a drum", audio_length_in_s=0.020125, steps=1, seed=0).waveform.shape == (322,)
    assert [model.mel_frames(s) for s in (0.02, 0.0205, 0.020125, 0.3)] == [80, 82, 82, 1200]


def test_seeds_decide_the_noise_and_minus_one_draws_one_to_replay(model):
    first = model("a bell", audio_length_in_s=0.01, steps=2, seed=3).waveform
    assert np.array_equal(first, model("a bell", audio_length_in_s=0.01, steps=2, seed=3).waveform)
    assert not np.array_equal(first, model("a bell", audio_length_in_s=0.01, steps=2, seed=4).waveform)
    drawn = model("a bell", audio_length_in_s=0.01, steps=2)
    assert np.array_equal(drawn.waveform, model("a bell", audio_length_in_s=0.01, steps=2, seed=drawn.seed).waveform)
    mine = model("a bell", audio_length_in_s=0.01, steps=2, generator=torch.Generator().manual_seed(3))
    assert mine.seed == -1 and np.array_equal(mine.waveform, first)


def test_progress_is_reported_per_step_and_interrupt_stops_with_a_clip(model):
    steps = []
    model("a bell", audio_length_in_s=0.01, steps=3, seed=1, callback=lambda p: steps.append((p.step, p.total_steps)))
    assert steps == [(1, 3), (2, 3), (3, 3)]
    control, seen = GenerationControl(), []
    control.interrupt()
    stopped = model("a bell", audio_length_in_s=0.01, steps=3, seed=1, control=control,
                    callback=lambda p: seen.append(p.step))
    full = model("a bell", audio_length_in_s=0.01, steps=3, seed=1)
    assert seen == [1] and stopped.interrupted and stopped.waveform.shape == full.waveform.shape == (160,)
    assert not np.array_equal(stopped.waveform, full.waveform)


def test_the_shared_pipelines_scheduler_is_left_alone(model):
    before = model.pipeline.scheduler
    model("a bell", audio_length_in_s=0.01, steps=2, seed=1)
    assert model.pipeline.scheduler is before and before.num_inference_steps is None


def test_a_clip_shorter_than_one_latent_row_is_refused_naming_the_minimum(model):
    with pytest.raises(ValueError, match=r"audio_length_in_s must be at least 0.0005 s for this model"):
        model("a bell", audio_length_in_s=0.0004, steps=1)


@pytest.mark.parametrize("settings, error, message", [
    ({"audio_length_in_s": 0}, ValueError, r"audio_length_in_s must be a number of seconds in \(0, 120\]"),
    ({"audio_length_in_s": 121}, ValueError, r"in \(0, 120\] or None"),
    ({"audio_length_in_s": float("nan")}, ValueError, "audio_length_in_s must be"),
    ({"audio_length_in_s": True}, ValueError, "audio_length_in_s must be"),
    ({"audio_length_in_s": 10 ** 400}, ValueError, r"in \(0, 120\] or None"),  # no OverflowError
    ({"steps": 0}, ValueError, r"steps must be an integer in \[1, 1000\], got 0"),
    ({"cfg_scale": -1}, ValueError, r"cfg_scale must be a number in \[0, 100\]"),
    ({"seed": -2}, ValueError, "seed must be an integer in"),
    ({"negative_prompt": None}, TypeError, "negative_prompt must be a string, got NoneType"),
    ({"generator": 5}, TypeError, "generator must be a torch.Generator"),
    ({"generator": torch.Generator(), "seed": 3}, ValueError, "Pass seed= or generator=, not both"),
    ({"batch_size": 0}, ValueError, r"batch_size must be an integer in \[1, 16\], got 0"),
    ({"batch_size": 17}, ValueError, r"batch_size must be an integer in \[1, 16\], got 17"),
    ({"batch_size": 2.0}, ValueError, r"batch_size must be an integer in \[1, 16\]"),
    ({"transcription": None}, TypeError, "transcription must be a string .*got NoneType"),
])
def test_bad_settings_are_refused_naming_the_value_and_range(settings, error, message):
    with pytest.raises(error, match=message):
        check_audio_settings(**settings)


def test_a_hub_repo_downloads_the_vocoder_with_the_pipelines_components():
    from pipelines.text_to_audio import select_text_to_audio_files

    listing = ["model_index.json", "README.md", "unet/config.json", "unet/diffusion_pytorch_model.bin",
               "unet/diffusion_pytorch_model.safetensors", "vae/config.json", "vae/diffusion_pytorch_model.bin",
               "text_encoder/config.json", "text_encoder/pytorch_model.bin", "tokenizer/vocab.json",
               "tokenizer/merges.txt", "scheduler/scheduler_config.json", "vocoder/config.json",
               "vocoder/pytorch_model.bin", "vocoder/model.safetensors"]
    index = {"_class_name": "AudioLDMPipeline", "unet": ["diffusers", "UNet2DConditionModel"],
             "vae": ["diffusers", "AutoencoderKL"], "text_encoder": ["transformers", "ClapTextModelWithProjection"],
             "tokenizer": ["transformers", "RobertaTokenizerFast"], "scheduler": ["diffusers", "DDIMScheduler"],
             "vocoder": ["transformers", "SpeechT5HifiGan"]}
    assert select_text_to_audio_files("cvssp/audioldm", listing, lambda name: index) == sorted([
        "model_index.json", "unet/config.json", "unet/diffusion_pytorch_model.safetensors", "vae/config.json",
        "vae/diffusion_pytorch_model.bin", "text_encoder/config.json", "text_encoder/pytorch_model.bin",
        "tokenizer/vocab.json", "tokenizer/merges.txt", "scheduler/scheduler_config.json", "vocoder/config.json",
        "vocoder/model.safetensors"])


AUDIOLDM2_LISTING = [
    "model_index.json", "README.md", "unet/config.json", "unet/diffusion_pytorch_model.safetensors",
    "unet/diffusion_pytorch_model.bin", "vae/config.json", "vae/diffusion_pytorch_model.safetensors",
    "text_encoder/config.json", "text_encoder/model.safetensors", "text_encoder_2/config.json",
    "text_encoder_2/model.safetensors", "text_encoder_2/pytorch_model.bin", "tokenizer/vocab.json",
    "tokenizer/merges.txt", "tokenizer_2/spiece.model", "tokenizer_2/tokenizer_config.json",
    "scheduler/scheduler_config.json", "vocoder/config.json", "vocoder/model.safetensors",
    "feature_extractor/preprocessor_config.json", "projection_model/config.json",
    "projection_model/diffusion_pytorch_model.safetensors", "projection_model/diffusion_pytorch_model.bin",
    "language_model/config.json", "language_model/model.safetensors", "language_model/pytorch_model.bin"]
AUDIOLDM2_INDEX = {
    "_class_name": "AudioLDM2Pipeline", "unet": ["diffusers", "AudioLDM2UNet2DConditionModel"],
    "vae": ["diffusers", "AutoencoderKL"], "text_encoder": ["transformers", "ClapModel"],
    "text_encoder_2": ["transformers", "T5EncoderModel"], "tokenizer": ["transformers", "RobertaTokenizerFast"],
    "tokenizer_2": ["transformers", "T5TokenizerFast"], "scheduler": ["diffusers", "DDIMScheduler"],
    "vocoder": ["transformers", "SpeechT5HifiGan"], "feature_extractor": ["transformers", "ClapFeatureExtractor"],
    "projection_model": ["audioldm2", "AudioLDM2ProjectionModel"], "language_model": ["transformers", "GPT2Model"]}


def test_an_audioldm2_repo_downloads_its_projection_language_model_and_feature_extractor():
    from pipelines.text_to_audio import select_text_to_audio_files

    assert select_text_to_audio_files("cvssp/audioldm2", AUDIOLDM2_LISTING, lambda name: AUDIOLDM2_INDEX) == sorted([
        "model_index.json", "unet/config.json", "unet/diffusion_pytorch_model.safetensors", "vae/config.json",
        "vae/diffusion_pytorch_model.safetensors", "text_encoder/config.json", "text_encoder/model.safetensors",
        "text_encoder_2/config.json", "text_encoder_2/model.safetensors", "tokenizer/vocab.json",
        "tokenizer/merges.txt", "tokenizer_2/spiece.model", "tokenizer_2/tokenizer_config.json",
        "scheduler/scheduler_config.json", "vocoder/config.json", "vocoder/model.safetensors",
        "feature_extractor/preprocessor_config.json", "projection_model/config.json",
        "projection_model/diffusion_pytorch_model.safetensors", "language_model/config.json",
        "language_model/model.safetensors"])


def test_a_repo_of_another_pipeline_class_is_refused_before_any_download():
    from pipelines.text_to_audio import select_text_to_audio_files

    index = {**AUDIOLDM2_INDEX, "_class_name": "StableDiffusionPipeline"}
    with pytest.raises(ValueError, match="'StableDiffusionPipeline' pipeline, not a text-to-audio model; accepted "
                                         "pipeline classes: AudioLDMPipeline, MusicLDMPipeline, AudioLDM2Pipeline"):
        select_text_to_audio_files("org/sd", AUDIOLDM2_LISTING, lambda name: index)


def test_a_scheduler_with_more_calls_than_steps_reports_the_users_steps(tiny_audioldm_dir, tmp_path):
    """PNDM (diffusers' AudioLDM tests' scheduler) makes steps + 1 model calls; progress still ends at steps/steps,
    and the waveform is still diffusers'."""
    import shutil

    from diffusers import AudioLDMPipeline, PNDMScheduler

    folder = tmp_path / "pndm"
    shutil.copytree(tiny_audioldm_dir, folder)
    pipe = AudioLDMPipeline.from_pretrained(str(folder))
    pipe.scheduler = PNDMScheduler.from_config(pipe.scheduler.config, skip_prk_steps=True)
    pipe.set_progress_bar_config(disable=True)
    model, seen = TextToAudio(pipe), []
    result = model("a bell", audio_length_in_s=0.01, steps=3, seed=2, callback=lambda p: seen.append(p.step))
    assert seen == [1, 2, 3]
    expected = pipe("a bell", audio_length_in_s=0.01, num_inference_steps=3,
                    generator=torch.Generator().manual_seed(2)).audios[0]
    np.testing.assert_allclose(result.waveform, expected, rtol=0, atol=1e-7)
