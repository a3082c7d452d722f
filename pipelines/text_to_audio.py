"""Text to audio with diffusers' AudioLDM, MusicLDM and AudioLDM 2 pipelines (mel-spectrogram latent diffusion with a
HiFi-GAN vocoder; `pipelines.audio_models` holds what differs between them: the prompt encoding and the defaults).

The weights, prompt encoding, latent preparation, mel decoding and vocoder are diffusers' pipelines' own; the
denoising loop is run here so a clip takes what an SD image takes: a seed (or a torch generator), a batch whose clip k
is drawn from seed + k (as A1111's batch images), a step callback with `StepProgress` and Interrupt through
`GenerationControl`. The loop is exactly diffusers' (the model's own scheduler, classifier-free guidance on the UNet's
conditioning), so a waveform equals diffusers' for the same generator, except that a clip always has
int(seconds x rate) samples: diffusers gives a few ms less for lengths that fall inside a latent row
(`TextToAudio.mel_frames`). diffusers re-orders a batch by CLAP score when librosa is installed; here clip k stays
the clip of seed + k, so any clip can be made again alone, also with a random-noise scheduler (Euler a, DDPM, DPM++
SDE ...): clip k's step noise comes from its own generator or Brownian tree, as mixkit's image pipelines do per image,
where diffusers draws the whole batch's from one generator.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Callable

from pipelines.audio_models import (AudioModelFamily, AudioPrompt, check_transcription_fits, family_named,
                                    family_of)
from pipelines.control import GenerationControl, StepProgress
from pipelines.diffusers_loop import (LoopProgress, check_cfg_scale, check_generator, check_int, check_prompts,
                                      guided_prediction, seeded_generator)

MAX_AUDIO_SECONDS = 120.0  # AudioLDM was trained on 10 s clips; longer ones are one UNet pass over a longer mel
MAX_STEPS = 1000
MAX_CFG = 100.0
MAX_WAVEFORMS = 16  # clips per call, one UNet batch (A1111's batch size limit)
# steps and cfg_scale None: the model family's diffusers defaults (AudioLDM 10 steps / 2.5, MusicLDM 200 / 2.0,
# AudioLDM 2 200 / 3.5); audio_length_in_s None: the model's native length (5.12 s AudioLDM, 10.24 s the others)
DEFAULT_STEPS, DEFAULT_CFG = None, None


@dataclass
class AudioResult:
    """A call's clips: mono float32 waveforms (numpy, samples in [-1, 1] for a trained vocoder) at `sample_rate`, the
    seed that drew each one's noise (-1 each when a caller's generator drew them) and whether Interrupt cut the call
    short (the clips are then the latest denoised estimate, as A1111 hands back an image). `waveform` and `seed` are
    the first clip's."""

    waveforms: list
    sample_rate: int
    seeds: list
    interrupted: bool = False

    @property
    def waveform(self):
        return self.waveforms[0]

    @property
    def seed(self) -> int:
        return self.seeds[0]


def check_audio_settings(*, prompt: Any = "", negative_prompt: Any = "", audio_length_in_s: Any = None,
                         steps: Any = DEFAULT_STEPS, cfg_scale: Any = DEFAULT_CFG, seed: Any = -1,
                         batch_size: Any = 1, transcription: Any = "", generator: Any = None) -> None:
    """Raise TypeError/ValueError naming the first bad value and its allowed range; nothing loads or runs here.
    What depends on the model is checked by the call: the shortest clip (one latent row: 0.04 s for AudioLDM) and
    whether the model reads a `transcription` (`TextToAudio.check_model_settings`)."""
    from pipelines.params import SEED_MAX

    check_prompts(prompt, negative_prompt)
    if not isinstance(transcription, str):
        raise TypeError(f"transcription must be a string (the words an AudioLDM 2 text-to-speech model speaks; empty "
                        f"for other models), got {type(transcription).__name__}.")
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if audio_length_in_s is not None and (
            isinstance(audio_length_in_s, bool) or not isinstance(audio_length_in_s, numbers.Real)
            or not 0 < audio_length_in_s <= MAX_AUDIO_SECONDS):
        raise ValueError(f"audio_length_in_s must be a number of seconds in (0, {MAX_AUDIO_SECONDS:g}] or None (the "
                         f"model's native length: 5.12 s for AudioLDM, 10.24 s for MusicLDM and AudioLDM 2), got "
                         f"{audio_length_in_s!r}.")
    if steps is not None:
        check_int("steps", steps, 1, MAX_STEPS)
    check_int("seed", seed, -1, SEED_MAX)
    check_int("batch_size", batch_size, 1, MAX_WAVEFORMS)
    if cfg_scale is not None:
        check_cfg_scale(cfg_scale, MAX_CFG)
    check_generator(generator, seed)


def select_text_to_audio_files(repo: str, filenames: list[str], read_json: Callable[[str], dict]) -> list[str]:
    """The files of a hub text-to-audio repo to download: the SD-like components mixkit's pipeline selector picks
    (unet, vae, text encoders, tokenizers, scheduler) and the folders only its family has (`vocoder/`, and for
    AudioLDM 2 `projection_model/`, `language_model/`, `feature_extractor/`). A repo of another pipeline class is
    refused before anything downloads."""
    from mixkit.models.diffusion.hub_files import MODEL_INDEX, folder_files, pipeline_file_selector

    chosen = pipeline_file_selector()(repo, filenames, read_json)  # refuses a repo without model_index.json
    family = family_named(read_json(MODEL_INDEX).get("_class_name"), f"The Hugging Face repo {repo!r}")
    extra = [name for folder, stems in family.extra_folders.items()
             for name in folder_files(repo, filenames, folder, stems, None, None)]
    return sorted({*chosen, *extra})


def clip_generators(generator: Any, seeds: list[int]) -> Any:
    """The generators a call draws with: clip k's own (seeded seed + k, clip 0's being `generator`) as a list, so the
    starting noise and every ancestral step's noise of clip k are those of a call with seed + k alone (diffusers'
    `randn_tensor` draws row k from entry k of a list); a caller's generator (seeds -1) as it is, drawing the whole
    batch at once as diffusers does."""
    import torch

    if seeds[0] == -1:
        return generator
    return [generator] + [torch.Generator("cpu").manual_seed(seed) for seed in seeds[1:]]


def pipeline_class_of(folder) -> AudioModelFamily:
    """The family a model folder's model_index.json names (`_class_name`); ValueError naming the accepted ones."""
    import json
    from pathlib import Path

    from mixkit.errors import ModelNotFoundError

    index = Path(folder) / "model_index.json"
    try:
        class_name = json.loads(index.read_text(encoding="utf-8")).get("_class_name")
    except (OSError, ValueError) as error:
        raise ModelNotFoundError(f"{str(index)!r} is not a readable model_index.json ({error}); pass a diffusers "
                                 "text-to-audio folder saved with save_pretrained, or its hub id.") from None
    return family_named(class_name, f"The model {str(folder)!r}")


class TextToAudio:
    """A loaded AudioLDM, MusicLDM or AudioLDM 2;
    `clips = TextToAudio.from_pretrained("cvssp/audioldm")("rain on a tin roof", seed=1)`.

    One instance may serve several callers: every call builds its own scheduler, so the loaded pipeline's scheduler
    is never changed."""

    def __init__(self, pipeline: Any) -> None:
        self.family = family_of(pipeline)  # refuses a pipeline of another class, naming the accepted ones
        self.pipeline = pipeline

    @classmethod
    def from_pretrained(cls, source: str, *, dtype: Any = None, device: str = "cpu") -> "TextToAudio":
        """Load a diffusers AudioLDM / MusicLDM / AudioLDM 2 folder or hub id, the class chosen by its
        model_index.json (only the files it loads are downloaded; offline, a hub id missing from the cache fails at
        once naming it and what to do)."""
        import torch

        from mixkit.io.sources import resolve_model_source

        folder = resolve_model_source(source, select_files=select_text_to_audio_files)
        family = pipeline_class_of(folder)
        pipeline = family.load_class().from_pretrained(str(folder), dtype=dtype or torch.float32)
        pipeline.set_progress_bar_config(disable=True)
        return cls(pipeline.to(device))

    @property
    def sample_rate(self) -> int:
        """Samples per second of the vocoder's output (16000 for AudioLDM, MusicLDM and AudioLDM 2)."""
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
        """The clip length diffusers uses when none is given: the UNet's sample size in seconds (5.12 s AudioLDM)."""
        return int(self.pipeline.unet.config.sample_size) * self.shortest_clip

    @property
    def reads_transcription(self) -> bool:
        """Whether this is a text-to-speech checkpoint (AudioLDM 2 with a VITS text encoder) that speaks a
        `transcription`."""
        return self.family.reads_transcription(self.pipeline)

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

    def check_model_settings(self, audio_length_in_s: float | None, transcription: str) -> None:
        """Refuse what this model cannot do, before any work: a clip shorter than one latent row, a transcription
        for a model that reads none, none for a text-to-speech checkpoint."""
        if audio_length_in_s is not None and audio_length_in_s < self.shortest_clip:
            raise ValueError(f"audio_length_in_s must be at least {self.shortest_clip:g} s for this model (one latent "
                             f"row of its mel spectrogram), got {audio_length_in_s!r}.")
        check_transcription_fits(transcription, self.reads_transcription, self.family.label)

    def __call__(self, prompt: str, *, negative_prompt: str = "", audio_length_in_s: float | None = None,
                 steps: int | None = DEFAULT_STEPS, cfg_scale: float | None = DEFAULT_CFG, seed: int = -1,
                 batch_size: int = 1, transcription: str = "", generator: Any = None,
                 callback: Callable[[StepProgress], Any] | None = None,
                 control: GenerationControl | None = None) -> AudioResult:
        """Generate `batch_size` mono clips of `audio_length_in_s` seconds (default the model's native length); clip k
        is drawn from seed + k. steps / cfg_scale None: the model family's defaults (diffusers')."""
        import numpy as np
        import torch

        from pipelines.samplers.noise import seed_brownian_noise

        # 1. Check inputs, before any work
        check_audio_settings(prompt=prompt, negative_prompt=negative_prompt, audio_length_in_s=audio_length_in_s,
                             steps=steps, cfg_scale=cfg_scale, seed=seed, batch_size=batch_size,
                             transcription=transcription, generator=generator)
        self.check_model_settings(audio_length_in_s, transcription)
        seconds = self.native_length if audio_length_in_s is None else float(audio_length_in_s)
        steps = self.family.default_steps if steps is None else steps
        cfg_scale = self.family.default_cfg if cfg_scale is None else cfg_scale
        pipe, control = self.pipeline, control or GenerationControl()
        # 2. Seeds: -1 draws one, as A1111 does, and clip k takes seed + k; a caller's generator draws every clip
        seed, generator = seeded_generator(seed, generator)
        seeds = [seed + index for index in range(batch_size)] if seed != -1 else [-1] * batch_size
        # 3. Mel frames: whole latent rows holding every sample asked for
        height = self.mel_frames(seconds)
        device = pipe._execution_device
        with torch.inference_mode():
            # 4. Encode the prompts (the family's: CLAP class label, or AudioLDM 2's T5 + GPT-2 states)
            guided = cfg_scale > 1.0
            conditioning = self.family.encode(pipe, AudioPrompt(prompt, negative_prompt, batch_size, guided,
                                                                transcription), device)
            dtype = pipe.unet.dtype
            # 5. Timesteps of a fresh scheduler (the shared pipeline's is left alone); a Brownian-tree SDE scheduler
            # (DPM++ SDE, which ignores generators and would seed itself from torch's global RNG) gets one tree per
            # clip, seeded with the clip's seed (a caller's generator: its initial seed + k)
            scheduler = type(pipe.scheduler).from_config(pipe.scheduler.config)
            scheduler.set_timesteps(steps, device=device)
            seed_brownian_noise(scheduler, seeds if seed != -1
                                else [generator.initial_seed() + index for index in range(batch_size)])
            # 6. Starting noise, drawn as diffusers' prepare_latents draws it (mel frames x mel bins, in latents)
            generators = clip_generators(generator, seeds)
            latents = self._initial_latents(scheduler, height, dtype, generators, len(seeds), device)
            # 7. Denoise; an ancestral scheduler's step noise for clip k comes from clip k's generator
            latents, stopped = self._denoise(scheduler, latents, conditioning, cfg_scale, guided, steps,
                                             pipe.prepare_extra_step_kwargs(generators, 0.0), callback, control)
            # 8. Mel spectrogram -> waveform, cut to the length asked for (diffusers' decoding, term for term)
            mel = pipe.vae.decode(1 / pipe.vae.config.scaling_factor * latents).sample
            waveforms = pipe.mel_spectrogram_to_waveform(mel)
        samples = self.sample_count(seconds)
        clips = [waveform[:samples].numpy().astype(np.float32) for waveform in waveforms]
        return AudioResult(waveforms=clips, sample_rate=self.sample_rate, seeds=seeds, interrupted=stopped)

    def _initial_latents(self, scheduler, height, dtype, generators, count, device):
        """(clips, channels, rows, bins) noise, each clip's row from its own generator (or all from a caller's
        generator in one call), as diffusers' prepare_latents draws it."""
        from diffusers.utils.torch_utils import randn_tensor

        pipe, scale = self.pipeline, int(self.pipeline.vae_scale_factor)
        shape = (count, pipe.unet.config.in_channels, height // scale, int(pipe.vocoder.config.model_in_dim) // scale)
        return randn_tensor(shape, generator=generators, device=device, dtype=dtype) * scheduler.init_noise_sigma

    def _denoise(self, scheduler, latents, conditioning, cfg_scale, guided, steps, step_kwargs, callback, control):
        """The sampling loop: (final latents, whether Interrupt stopped it: then the latest denoised estimate)."""
        import torch

        unet, timesteps = self.pipeline.unet, scheduler.timesteps
        progress = LoopProgress(steps, len(timesteps), callback, control)
        for index, t in enumerate(timesteps):
            model_input = scheduler.scale_model_input(torch.cat([latents] * 2) if guided else latents, t)
            noise_pred = unet(model_input, t, **conditioning).sample
            noise_pred = guided_prediction(noise_pred, cfg_scale, guided, index + 1, "audio")
            output = scheduler.step(noise_pred, t, latents, **step_kwargs)
            latents = output.prev_sample
            if progress.stop_after(index, latents):
                estimate = getattr(output, "pred_original_sample", None)
                return (latents if estimate is None else estimate), True
        return latents, False
