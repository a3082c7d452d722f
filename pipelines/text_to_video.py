"""Text to video with ModelScope's text-to-video model (diffusers' `TextToVideoSDPipeline`: UNet3D, SD VAE, CLIP).

The weights, prompt encoding, latent preparation and decoding are diffusers' pipeline's own; the denoising loop is
run here so a video takes what an SD image takes: an A1111 sampler by name, a seed (or a torch generator), a step
callback with `StepProgress` and Interrupt through `GenerationControl`. Without a sampler the loop is exactly
diffusers' (`DPMSolverMultistepScheduler` on the model's scheduler config, as PaddleMIX's app and the model card run
it), so the frames equal `TextToVideoSDPipeline(...)`'s for the same generator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pipelines.control import GenerationControl, StepProgress
from pipelines.diffusers_loop import (LoopProgress, check_cfg_scale, check_generator, check_int, check_prompts,
                                      guided_prediction, seeded_generator)

MAX_FRAMES = 256  # decoded in one VAE batch, as diffusers does; ModelScope's model was trained on 16
MAX_SIDE = 2048
MAX_STEPS = 1000
MAX_CFG = 100.0
DEFAULT_FRAMES, DEFAULT_STEPS, DEFAULT_CFG = 16, 25, 9.0  # diffusers' num_frames and guidance; PaddleMIX's 25 steps
# Any SD-family scheduler config: enough to build a named sampler's scheduler and check it before the model loads.
_SD_SCHEDULER_CONFIG = {"num_train_timesteps": 1000, "beta_start": 0.00085, "beta_end": 0.012,
                        "beta_schedule": "scaled_linear"}


@dataclass
class VideoResult:
    """The frames of one video, the seed that drew its noise (-1 when a caller's generator did) and whether
    Interrupt cut it short (the frames are then the latest denoised estimate, as A1111 hands back an image)."""

    frames: list
    seed: int
    interrupted: bool = False


def check_video_settings(*, prompt: Any = "", negative_prompt: Any = "", num_frames: Any = DEFAULT_FRAMES,
                         steps: Any = DEFAULT_STEPS, cfg_scale: Any = DEFAULT_CFG, width: Any = None,
                         height: Any = None, seed: Any = -1, sampler: Any = None, schedule_type: Any = "Automatic",
                         generator: Any = None, size_multiple: int = 8) -> None:
    """Raise TypeError/ValueError naming the first bad value and its allowed range; nothing loads or runs here."""
    from pipelines.params import SEED_MAX

    check_prompts(prompt, negative_prompt)
    check_int("num_frames", num_frames, 1, MAX_FRAMES)
    check_int("steps", steps, 1, MAX_STEPS)
    check_int("seed", seed, -1, SEED_MAX)
    check_cfg_scale(cfg_scale, MAX_CFG)
    for name, value in (("width", width), ("height", height)):
        if value is None:
            continue
        check_int(name, value, size_multiple, MAX_SIDE)
        if value % size_multiple:
            raise ValueError(f"{name} must be a multiple of {size_multiple} (the VAE's downscale), got {value}; "
                             f"try {value - value % size_multiple}.")
    check_generator(generator, seed)
    if sampler is not None:
        check_video_sampler(sampler, schedule_type, steps)
    elif schedule_type != "Automatic":
        raise ValueError(f"schedule_type {schedule_type!r} needs a sampler; name one (e.g. sampler='DPM++ 2M').")


def check_video_sampler(sampler: Any, schedule_type: Any, steps: int) -> None:
    """A sampler the video loop can run: known by name (A1111's), enough steps, and one diffusers step per call.

    A1111's DPM adaptive walks the whole batch with its own step control and DDIM CFG++ needs the unconditional
    prediction handed to it: both need mixkit's image sampling loop, which does not take 5-D video latents."""
    from pipelines.samplers import check_sampler_steps, make_scheduler, resolve_sampler

    spec, _ = resolve_sampler(sampler, schedule_type)  # unknown name -> error listing the samplers
    check_sampler_steps(spec.name, steps)
    scheduler = make_scheduler(spec.name, _SD_SCHEDULER_CONFIG, schedule_type)
    if getattr(scheduler, "walks_whole_batch", False) or getattr(scheduler, "needs_uncond_prediction", False):
        raise ValueError(f"Sampler {spec.name!r} is not available for video (it needs the image sampling loop); "
                         "choose another, e.g. 'DPM++ 2M', 'Euler a', 'DDIM' or 'UniPC'.")


class TextToVideo:
    """A loaded text-to-video model; `video = TextToVideo.from_pretrained(src)("a cat surfing", num_frames=16)`.

    One instance may serve several callers: every call builds its own scheduler, so the loaded pipeline's scheduler
    is never changed."""

    def __init__(self, pipeline: Any) -> None:
        self.pipeline = pipeline

    @classmethod
    def from_pretrained(cls, source: str, *, dtype: Any = None, device: str = "cpu") -> "TextToVideo":
        """Load a diffusers `TextToVideoSDPipeline` folder or hub id (only the files it loads are downloaded;
        offline, a hub id missing from the cache fails at once naming it and what to do)."""
        import torch
        from diffusers import TextToVideoSDPipeline

        from mixkit.io.sources import resolve_model_source
        from mixkit.models.diffusion.hub_files import pipeline_file_selector

        folder = resolve_model_source(source, select_files=pipeline_file_selector())
        pipeline = TextToVideoSDPipeline.from_pretrained(str(folder), dtype=dtype or torch.float32)
        pipeline.set_progress_bar_config(disable=True)
        return cls(pipeline.to(device))

    @property
    def vae_scale_factor(self) -> int:
        return int(self.pipeline.vae_scale_factor)

    @property
    def native_size(self) -> int:
        """The frame side diffusers uses when none is given: the UNet's sample size in pixels (256 for ModelScope)."""
        return int(self.pipeline.unet.config.sample_size) * self.vae_scale_factor

    def make_scheduler(self, sampler: str | None, schedule_type: str = "Automatic"):
        """A fresh scheduler for one call: the A1111 sampler `sampler` on the model's betas, or (None) diffusers'
        DPM-Solver++ multistep as PaddleMIX's app and the model card configure it."""
        config = self.pipeline.scheduler.config
        if sampler is None:
            from diffusers import DPMSolverMultistepScheduler

            return DPMSolverMultistepScheduler.from_config(config)
        from pipelines.samplers import make_scheduler

        return make_scheduler(sampler, config, schedule_type)

    def __call__(self, prompt: str, *, negative_prompt: str = "", num_frames: int = DEFAULT_FRAMES,
                 steps: int = DEFAULT_STEPS, cfg_scale: float = DEFAULT_CFG, width: int | None = None,
                 height: int | None = None, seed: int = -1, sampler: str | None = None,
                 schedule_type: str = "Automatic", generator: Any = None,
                 callback: Callable[[StepProgress], Any] | None = None,
                 control: GenerationControl | None = None) -> VideoResult:
        """Generate `num_frames` frames (PIL images, width x height, default the model's native size)."""
        import torch

        # 1. Check inputs, before any work
        check_video_settings(prompt=prompt, negative_prompt=negative_prompt, num_frames=num_frames, steps=steps,
                             cfg_scale=cfg_scale, width=width, height=height, seed=seed, sampler=sampler,
                             schedule_type=schedule_type, generator=generator, size_multiple=self.vae_scale_factor)
        pipe, control = self.pipeline, control or GenerationControl()
        width, height = width or self.native_size, height or self.native_size
        # 2. Seed: -1 draws one, as A1111 does; a caller's generator is used as it is
        seed, generator = seeded_generator(seed, generator)
        device = pipe._execution_device
        tree_seed = seed if seed != -1 else _seed_from_state(generator)  # before the noise is drawn from it
        with torch.inference_mode():
            # 3. Encode the prompts (diffusers' encode_prompt: CLIP, 77 tokens, truncated as there)
            guided = cfg_scale > 1.0
            cond, uncond = pipe.encode_prompt(prompt, device, 1, guided, negative_prompt)
            embeddings = torch.cat([uncond, cond]) if guided else cond
            # 4. Timesteps of a fresh scheduler
            scheduler = self.make_scheduler(sampler, schedule_type)
            scheduler.set_timesteps(steps, device=device)
            timesteps = scheduler.timesteps
            # 5. Starting noise, drawn as diffusers' prepare_latents draws it
            latents = self._initial_latents(scheduler, sampler, num_frames, height, width, embeddings.dtype,
                                            generator, device)
            # 6. Denoise
            latents, stopped = self._denoise(scheduler, timesteps, latents, embeddings, cfg_scale, guided, steps,
                                             generator, tree_seed, callback, control)
            # 7. Decode every frame (one VAE batch, as diffusers) and convert to PIL
            video = pipe.decode_latents(latents)
            frames = pipe.video_processor.postprocess_video(video=video, output_type="pil")[0]
        return VideoResult(frames=list(frames), seed=seed, interrupted=stopped)

    def _initial_latents(self, scheduler, sampler, num_frames, height, width, dtype, generator, device):
        from diffusers.utils.torch_utils import randn_tensor

        from pipelines.samplers import initial_noise_scale, start_at_first_step

        channels = self.pipeline.unet.config.in_channels
        shape = (1, channels, num_frames, height // self.vae_scale_factor, width // self.vae_scale_factor)
        noise = randn_tensor(shape, generator=generator, device=device, dtype=dtype)
        if sampler is None:  # exactly diffusers' start
            return noise * scheduler.init_noise_sigma
        start_at_first_step(scheduler)
        return noise * initial_noise_scale(scheduler)  # where A1111's sampler starts

    def _denoise(self, scheduler, timesteps, latents, embeddings, cfg_scale, guided, steps, generator, tree_seed,
                 callback, control):
        """The sampling loop: (final latents, whether Interrupt stopped it: then the latest denoised estimate).
        `tree_seed` seeds the SDE samplers' Brownian tree."""
        import torch

        from pipelines.inpaint_blend import current_step_index, evaluation_alpha
        from pipelines.samplers import extra_step_kwargs, seed_brownian_noise
        from pipelines.stopped_latents import denoised_from_output

        frames = latents.shape[2]
        # DPM++ SDE's Brownian tree: one per frame (the frames are the scheduler's batch)
        seed_brownian_noise(scheduler, [tree_seed + frame for frame in range(frames)])
        step_kwargs = extra_step_kwargs(scheduler, generator)
        unet, progress = self.pipeline.unet, LoopProgress(steps, len(timesteps), callback, control)
        for index, t in enumerate(timesteps):
            # scaled once and repeated for the two CFG halves: the same elementwise scaling diffusers applies to the
            # repeated batch, kept apart for the interrupted run's denoised estimate
            scaled = scheduler.scale_model_input(latents, t)
            model_input = torch.cat([scaled] * 2) if guided else scaled
            noise_pred = unet(model_input, t, encoder_hidden_states=embeddings, return_dict=False)[0]
            noise_pred = guided_prediction(noise_pred, cfg_scale, guided, index + 1, "video")
            # The scheduler steps frames as a batch of images (B*F, C, h, w), as diffusers' loop does.
            batch = latents.shape[0]
            sample, guided_images = _as_images(latents), _as_images(noise_pred)
            scaled_images = sample if scaled is latents else _as_images(scaled)  # one object: no input scaling
            step_index = current_step_index(scheduler)
            output = scheduler.step(guided_images, t, sample, **step_kwargs)
            latents = _as_video(output.prev_sample, batch, frames)
            if progress.stop_after(index, latents):
                # the scheduler's own estimate where its step reports one, else (diffusers' DPM-Solver++, the
                # default) the one the guided output gives at this step's noise level: never the noisy sample
                estimate = getattr(output, "pred_original_sample", None)
                if estimate is None:
                    estimate = getattr(output, "denoised", None)
                if estimate is None:
                    alpha = evaluation_alpha(scheduler, sample, scaled_images, step_index=step_index, timestep=t)
                    estimate = denoised_from_output(guided_images, scaled_images, alpha,
                                                    scheduler.config.prediction_type)
                return _as_video(estimate.to(latents.dtype), batch, frames), True
        return latents, False


def _seed_from_state(generator) -> int:
    """A seed that a caller's generator's current state decides, drawn from a copy (the generator itself is left to
    draw the noise as diffusers would): the same generator state makes the same Brownian tree, hence the same video,
    where torch's global RNG would make each run differ."""
    import torch

    from pipelines.params import RANDOM_SEED_MAX

    copy = torch.Generator(generator.device).set_state(generator.get_state())
    return int(torch.randint(0, RANDOM_SEED_MAX + 1, (1,), generator=copy, device=generator.device))


def _as_images(video):
    batch, channels, frames, h, w = video.shape
    return video.permute(0, 2, 1, 3, 4).reshape(batch * frames, channels, h, w)


def _as_video(images, batch: int, frames: int):
    _, channels, h, w = images.shape
    return images.reshape(batch, frames, channels, h, w).permute(0, 2, 1, 3, 4)
