"""Text-to-image for SD 1.x / 2.x / SDXL with the WebUI's semantics (samplers, seeds, prompts, infotext)."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from mixkit.models.diffusion import DiffusionModel, ModelFamily
from pipelines.control import GenerationControl, StepCallback, StepProgress
from pipelines.generation import GenerationResult, ModelSession
from pipelines.params import GenerationLimits, Txt2ImgParams, check_txt2img_params, per_image
from pipelines.sampling import SamplingRequest, run_sampler
from pipelines.seeds import image_generators, image_seeds, initial_noise, resolve_seed
from pipelines.vae_decode import decode_latents


class TextToImage:
    """Generate images from text; one instance per loaded model, reusable across calls.

    `TextToImage.from_pretrained(source)` loads a diffusers folder, a single-file checkpoint or a
    hub id. Calling the pipeline takes a `Txt2ImgParams` or the same fields as keywords.
    """

    def __init__(self, model: DiffusionModel, *, limits: GenerationLimits | None = None,
                 embeddings_dir: str | os.PathLike | None = None, lora_dir: str | os.PathLike | None = None) -> None:
        self.model = model
        self.limits = limits or GenerationLimits()
        self.session = ModelSession(model, embeddings_dir=embeddings_dir, lora_dir=lora_dir)

    @classmethod
    def from_pretrained(cls, source: str | os.PathLike, *, dtype=None, device: str | None = None,
                        vae: str | os.PathLike | None = None, **kwargs: Any) -> "TextToImage":
        from mixkit.models.diffusion.loading import load_diffusion_model

        return cls(load_diffusion_model(source, dtype=dtype, device=device, vae=vae), **kwargs)

    def __call__(self, params: Txt2ImgParams | None = None, *, callback: StepCallback | None = None,
                 control: GenerationControl | None = None, generator=None, **kwargs: Any) -> GenerationResult:
        # 1. Check inputs before any work
        if params is None:
            params = Txt2ImgParams.from_kwargs(**kwargs)
        elif kwargs:
            params = replace(params, **kwargs)
        check_txt2img_params(params, self.limits, self.model.vae_scale_factor)
        control = control or GenerationControl()
        sampler = self.session.resolve_sampler(params.sampler, params.schedule_type)
        seeds, generators = self._seeds_and_generators(params, generator)
        prompts = per_image(params.prompt, params.batch_size)
        negatives = per_image(params.negative_prompt, params.batch_size)

        # 2. Apply LoRAs (from params and prompt tags) for the whole call; removed afterwards
        with self.session.prepared(prompts, negatives, params.loras, params.clip_skip) as prepared:
            result = GenerationResult()
            for batch_index in range(params.batch_count):
                if control.interrupted:
                    break
                first = batch_index * params.batch_size
                batch_seeds = seeds[first:first + params.batch_size]
                batch_generators = generators[first:first + params.batch_size]
                # 3. Encode prompts (cached across batches) and prepare latents
                plan = prepared.plan(params.steps)
                schedulers = sampler.make_schedulers(len(batch_seeds), params.steps, self.model.device)
                shape = (self.model.unet.config.in_channels, params.height // self.model.vae_scale_factor,
                         params.width // self.model.vae_scale_factor)
                latents = initial_noise(batch_generators, shape).to(self.model.device) * schedulers[0].init_noise_sigma

                # 4. Denoise
                def on_step(done: int, current, batch_index=batch_index) -> bool:
                    if callback is not None:
                        callback(StepProgress(done, params.steps, batch_index, params.batch_count, current, control))
                    return not (control.interrupted or control.take_skip())

                latents = run_sampler(SamplingRequest(
                    unet=self.model.unet, schedulers=schedulers, latents=latents, plan=plan,
                    combine_cfg=prepared.combine_cfg, cfg_scale=float(params.cfg_scale),
                    generators=batch_generators, steps=params.steps,
                    time_ids=self._time_ids(params, len(batch_seeds)), on_step=on_step,
                ))
                # 5. Decode and describe
                images = decode_latents(self.model.vae, latents)
                for k, image in enumerate(images):
                    infotext = self.session.infotext(
                        params, sampler, prompt=prompts[k], negative_prompt=negatives[k], seed=batch_seeds[k],
                        extra=prepared.infotext_extras(),
                    )
                    result.add(image, batch_seeds[k], infotext)
            result.interrupted = control.interrupted
        return result

    def _seeds_and_generators(self, params: Txt2ImgParams, generator):
        total = params.total_images
        if generator is None:
            seeds = image_seeds(resolve_seed(params.seed), total)
            return seeds, image_generators(seeds)
        generators = generator if isinstance(generator, list) else [generator] * total
        if len(generators) != total:
            raise ValueError(f"Got {len(generators)} generators for {total} images; pass one per image or a single one.")
        return [g.initial_seed() for g in generators], generators

    def _time_ids(self, params: Txt2ImgParams, batch: int):
        """SDXL micro-conditioning: original size, crop (0, 0), target size, as the WebUI sends it."""
        if self.model.family is not ModelFamily.SDXL:
            return None
        import torch

        row = [params.height, params.width, 0, 0, params.height, params.width]
        return torch.tensor([row] * batch, dtype=torch.float32)
