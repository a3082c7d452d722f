"""Text to audio with AudioLDM (diffusers' `AudioLDMPipeline`: CLAP text encoder, UNet, mel-spectrogram VAE,
SpeechT5 HiFi-GAN vocoder).

The weights, prompt encoding, latent preparation, mel decoding and vocoder are diffusers' pipeline's own; the
denoising loop is run here so a clip takes what an SD image takes: a seed (or a torch generator), a step callback
with `StepProgress` and Interrupt through `GenerationControl`. The loop is exactly diffusers' (the model's own
scheduler, guidance on the CLAP embedding as the UNet's class label), so the waveform equals
`AudioLDMPipeline(...)`'s for the same generator, except that a clip always has int(seconds x rate) samples: diffusers
gives a few ms less for lengths that fall inside a latent row (`TextToAudio.mel_frames`).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Callable

from pipelines.control import GenerationControl, StepProgress
from pipelines.diffusers_loop import (LoopProgress, check_cfg_scale, check_generator, check_int, check_prompts,
                                      guided_prediction, seeded_generator)

MAX_AUDIO_SECONDS = 120.0  # AudioLDM was trained on 10 s clips; longer ones are one UNet pass over a longer mel
MAX_STEPS = 1000
MAX_CFG = 100.0
# diffusers' (and ppdiffusers') defaults: 10 steps, guidance 2.5; None = the model's native length (5.12 s)
DEFAULT_STEPS, DEFAULT_CFG = 10, 2.5


@dataclass
class AudioResult:
    """One clip: a mono float32 waveform (numpy, samples in [-1, 1] for a trained vocoder) at `sample_rate`, the seed
    that drew its noise (-1 when a caller's generator did) and whether Interrupt cut it short (the clip is then the
    latest denoised estimate, as A1111 hands back an image)."""

    waveform: Any
    sample_rate: int
    seed: int
    interrupted: bool = False


def check_audio_settings(*, prompt: Any = "", negative_prompt: Any = "", audio_length_in_s: Any = None,
                         steps: Any = DEFAULT_STEPS, cfg_scale: Any = DEFAULT_CFG, seed: Any = -1,
                         generator: Any = None) -> None:
    """Raise TypeError/ValueError naming the first bad value and its allowed range; nothing loads or runs here.
    The model's shortest clip (one latent row: 0.04 s for AudioLDM) is checked by the call, which knows the model."""
    from pipelines.params import SEED_MAX

    check_prompts(prompt, negative_prompt)
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if audio_length_in_s is not None and (
            isinstance(audio_length_in_s, bool) or not isinstance(audio_length_in_s, numbers.Real)
            or not 0 < audio_length_in_s <= MAX_AUDIO_SECONDS):
        raise ValueError(f"audio_length_in_s must be a number of seconds in (0, {MAX_AUDIO_SECONDS:g}] or None (the "
                         f"model's native length, 5.12 s for AudioLDM), got {audio_length_in_s!r}.")
    check_int("steps", steps, 1, MAX_STEPS)
    check_int("seed", seed, -1, SEED_MAX)
    check_cfg_scale(cfg_scale, MAX_CFG)
    check_generator(generator, seed)


def select_audioldm_files(repo: str, filenames: list[str], read_json: Callable[[str], dict]) -> list[str]:
    """The files of a hub AudioLDM repo to download: the SD-like components mixkit's pipeline selector picks (unet,
    vae, text_encoder, tokenizer, scheduler) and the `vocoder/` folder, which no SD pipeline has."""
    from mixkit.models.diffusion.diffusers_folder import TRANSFORMERS_WEIGHTS
    from mixkit.models.diffusion.hub_files import folder_files, pipeline_file_selector

    chosen = pipeline_file_selector()(repo, filenames, read_json)
    return sorted({*chosen, *folder_files(repo, filenames, "vocoder", TRANSFORMERS_WEIGHTS, None, None)})


class TextToAudio:
    """A loaded AudioLDM; `clip = TextToAudio.from_pretrained("cvssp/audioldm")("rain on a tin roof", seed=1)`.

    One instance may serve several callers: every call builds its own scheduler, so the loaded pipeline's scheduler
    is never changed."""

    def __init__(self, pipeline: Any) -> None:
        self.pipeline = pipeline

    @classmethod
    def from_pretrained(cls, source: str, *, dtype: Any = None, device: str = "cpu") -> "TextToAudio":
        """Load a diffusers `AudioLDMPipeline` folder or hub id (only the files it loads are downloaded; offline, a
        hub id missing from the cache fails at once naming it and what to do)."""
        import torch
        from diffusers import AudioLDMPipeline

        from mixkit.io.sources import resolve_model_source

        folder = resolve_model_source(source, select_files=select_audioldm_files)
        pipeline = AudioLDMPipeline.from_pretrained(str(folder), dtype=dtype or torch.float32)
        pipeline.set_progress_bar_config(disable=True)
        return cls(pipeline.to(device))

    @property
    def sample_rate(self) -> int:
        """Samples per second of the vocoder's output (16000 for AudioLDM)."""
        return int(self.pipeline.vocoder.config.sampling_rate)

    @property
    def seconds_per_mel_frame(self) -> float:
        """The vocoder's hop: one mel frame becomes prod(upsample_rates) samples (160 = 0.01 s for AudioLDM)."""
        import numpy as np

        return float(np.prod(self.pipeline.vocoder.config.upsample_rates)) / self.sample_rate

    @property
    def shortest_clip(self) -> float:
        """Seconds of one latent row, the shortest clip the model makes (diffusers refuses shorter ones)."""
        return self.seconds_per_mel_frame * int(self.pipeline.vae_scale_factor)

    @property
    def native_length(self) -> float:
        """The clip length diffusers uses when none is given: the UNet's sample size in seconds (5.12 s)."""
        return int(self.pipeline.unet.config.sample_size) * self.shortest_clip

    def sample_count(self, audio_length_in_s: float) -> int:
        """Samples in a clip of `audio_length_in_s` seconds: int(seconds x rate), where diffusers cuts the vocoder's
        output (`mel_frames` makes sure there are that many)."""
        return int(audio_length_in_s * self.sample_rate)

    def mel_frames(self, audio_length_in_s: float) -> int:
        """Mel frames to denoise for a clip: enough for every sample asked for, rounded up to whole latent rows.

        diffusers truncates (int(seconds / hop)) and rounds up only when that is not a whole number of rows, so a
        length between two rows' ends came out short (5.125 s gave 5.12 s with AudioLDM). Rounding up whatever the
        fraction gives the full length; where diffusers' clip was full length the frame count, and so the waveform,
        is the same as its. round(..., 6) keeps float noise (0.3 / 0.01 = 29.999999999999996) from adding a row."""
        import math

        scale = int(self.pipeline.vae_scale_factor)
        frames = math.ceil(round(audio_length_in_s / self.seconds_per_mel_frame, 6))
        return math.ceil(frames / scale) * scale

    def __call__(self, prompt: str, *, negative_prompt: str = "", audio_length_in_s: float | None = None,
                 steps: int = DEFAULT_STEPS, cfg_scale: float = DEFAULT_CFG, seed: int = -1, generator: Any = None,
                 callback: Callable[[StepProgress], Any] | None = None,
                 control: GenerationControl | None = None) -> AudioResult:
        """Generate one mono clip of `audio_length_in_s` seconds (default the model's native length)."""
        import numpy as np
        import torch

        # 1. Check inputs, before any work
        check_audio_settings(prompt=prompt, negative_prompt=negative_prompt, audio_length_in_s=audio_length_in_s,
                             steps=steps, cfg_scale=cfg_scale, seed=seed, generator=generator)
        seconds = self.native_length if audio_length_in_s is None else float(audio_length_in_s)
        if seconds < self.shortest_clip:
            raise ValueError(f"audio_length_in_s must be at least {self.shortest_clip:g} s for this model (one latent "
                             f"row of its mel spectrogram), got {audio_length_in_s!r}.")
        pipe, control = self.pipeline, control or GenerationControl()
        # 2. Seed: -1 draws one, as A1111 does; a caller's generator is used as it is
        seed, generator = seeded_generator(seed, generator)
        # 3. Mel frames: whole latent rows holding every sample asked for
        height = self.mel_frames(seconds)
        device = pipe._execution_device
        with torch.inference_mode():
            # 4. Encode the prompts (diffusers' CLAP encoding, normalised, as the UNet's class label)
            guided = cfg_scale > 1.0
            embeddings = pipe._encode_prompt(prompt, device, 1, guided, negative_prompt)
            # 5. Timesteps of a fresh scheduler (the shared pipeline's is left alone)
            scheduler = type(pipe.scheduler).from_config(pipe.scheduler.config)
            scheduler.set_timesteps(steps, device=device)
            # 6. Starting noise, drawn as diffusers' prepare_latents draws it (mel frames x mel bins, in latents)
            latents = self._initial_latents(scheduler, height, embeddings.dtype, generator, device)
            # 7. Denoise
            latents, stopped = self._denoise(scheduler, latents, embeddings, cfg_scale, guided, steps,
                                             pipe.prepare_extra_step_kwargs(generator, 0.0), callback, control)
            # 8. Mel spectrogram -> waveform, cut to the length asked for
            waveform = pipe.mel_spectrogram_to_waveform(pipe.decode_latents(latents))
        waveform = waveform[0, :self.sample_count(seconds)].numpy().astype(np.float32)
        return AudioResult(waveform=waveform, sample_rate=self.sample_rate, seed=seed, interrupted=stopped)

    def _initial_latents(self, scheduler, height, dtype, generator, device):
        from diffusers.utils.torch_utils import randn_tensor

        pipe, scale = self.pipeline, int(self.pipeline.vae_scale_factor)
        shape = (1, pipe.unet.config.in_channels, height // scale, int(pipe.vocoder.config.model_in_dim) // scale)
        return randn_tensor(shape, generator=generator, device=device, dtype=dtype) * scheduler.init_noise_sigma

    def _denoise(self, scheduler, latents, embeddings, cfg_scale, guided, steps, step_kwargs, callback, control):
        """The sampling loop: (final latents, whether Interrupt stopped it: then the latest denoised estimate)."""
        import torch

        unet, timesteps = self.pipeline.unet, scheduler.timesteps
        progress = LoopProgress(steps, len(timesteps), callback, control)
        for index, t in enumerate(timesteps):
            model_input = scheduler.scale_model_input(torch.cat([latents] * 2) if guided else latents, t)
            noise_pred = unet(model_input, t, encoder_hidden_states=None, class_labels=embeddings).sample
            noise_pred = guided_prediction(noise_pred, cfg_scale, guided, index + 1, "audio")
            output = scheduler.step(noise_pred, t, latents, **step_kwargs)
            latents = output.prev_sample
            if progress.stop_after(index, latents):
                estimate = getattr(output, "pred_original_sample", None)
                return (latents if estimate is None else estimate), True
        return latents, False
