"""A denoising loss on held-out images, the same at every evaluation (kohya's validation loss).

The training loss of one step is a single draw of images, timesteps and noise, so its curve is mostly
noise; to see whether a run still improves, overfits, or where along it the best weights were, the
loss must be measured on images the run never trains on, with everything random fixed. Here each
held-out image is scored at `TIMESTEP_FRACTIONS` of the trained timestep range, with noise drawn
once per (image, timestep) from the validation seed, from the VAE posterior's mean (no sampling):
two evaluations differ only because the weights did.
"""

from __future__ import annotations

import random

import torch

from mixkit.training import diffusion_objective as objective
from mixkit.training.denoising_loop import SEED_STRIDE

# Where in [min_timestep, max_timestep) each held-out image is scored: low, middle and high noise alike.
TIMESTEP_FRACTIONS = (0.1, 0.3, 0.5, 0.7, 0.9)


def split_held_out(records: list, fraction: float, seed: int) -> tuple[list, list]:
    """(training records, held-out records): `fraction` of the non-class records, at least one, chosen by
    `seed` alone (the same images are held out on every run and resume with that seed); class
    (prior-preservation) images always train. Raises ValueError when nothing would be left to train on."""
    own = [i for i, record in enumerate(records) if not record.prior]
    count = max(1, round(fraction * len(own)))
    if count >= len(own):
        raise ValueError(f"validation_split={fraction} holds out {count} of the {len(own)} training images, leaving "
                         "none to train on; lower it or give a separate validation_dataset")
    held = set(random.Random(f"validation-split:{seed}").sample(own, count))
    return ([r for i, r in enumerate(records) if i not in held], [r for i, r in enumerate(records) if i in held])


def validation_timesteps(low: int, high: int) -> list[int]:
    """The fixed timesteps inside the trained range [low, high)."""
    return [min(high - 1, low + int(fraction * (high - low))) for fraction in TIMESTEP_FRACTIONS]


class HeldOutLoss:
    """The mean denoising loss of a held-out dataset, with latents (posterior means) and noise fixed at
    the first evaluation, so every later one differs from it only through the weights."""

    def __init__(self, dataset, *, batch_size: int, seed: int) -> None:
        self.dataset = dataset
        self.seed = seed
        self.batches = [sorted(batch) for batch in dataset.epoch_batches(0, batch_size, seed)]
        self._fixed: list[dict] | None = None
        self._schedule = None

    def _prepare(self, vae, scaling: float, device) -> list[dict]:
        prepared = []
        for batch_indices in self.batches:
            batch = self.dataset.load_batch(batch_indices)
            with torch.no_grad():
                pixels = batch["pixels"].to(device, vae.dtype)
                latents = vae.encode(pixels).latent_dist.mean.float() * scaling
            noises = []
            for index in batch_indices:
                generator = torch.Generator().manual_seed(self.seed * SEED_STRIDE + index)
                noises.append(torch.randn((len(TIMESTEP_FRACTIONS), *latents.shape[1:]), generator=generator))
            prepared.append({**batch, "latents": latents.cpu(), "noise": torch.stack(noises, dim=1)})
        return prepared

    @torch.no_grad()
    def __call__(self, denoiser, model, device, *, min_timestep: int = 0, max_timestep: int | None = None,
                 masked: bool = False, unmasked_weight: float = 0.0, normalize_masks: bool = False) -> float:
        """The loss of `denoiser` (captions -> prediction, as in training) at its current weights."""
        from diffusers import DDPMScheduler

        if self._fixed is None:  # latents, noise and the schedule, once
            self._schedule = DDPMScheduler.from_config(model.scheduler_config)
            self._fixed = self._prepare(model.vae, model.vae.config.scaling_factor, device)
        alphas_cumprod = self._schedule.alphas_cumprod
        low, high = min_timestep, max_timestep or self._schedule.config.num_train_timesteps
        total, count = 0.0, 0
        for batch in self._fixed:
            latents = batch["latents"]
            cells = (objective.latent_loss_mask(batch["masks"], latents.shape[-2:], unmasked_weight, normalize_masks)
                     if masked else None)
            for slot, timestep in enumerate(validation_timesteps(low, high)):
                timesteps = torch.full((latents.shape[0],), timestep, dtype=torch.long)
                noise = batch["noise"][slot]
                noisy = objective.add_noise(latents, noise, timesteps, alphas_cumprod)
                prediction = denoiser(noisy.to(device), timesteps.to(device), batch["captions"],
                                      batch["original_sizes"], batch["crops"])
                target = objective.diffusion_target(latents, noise, timesteps, alphas_cumprod, model.prediction_type)
                loss = objective.weighted_mse(prediction.cpu(), target, None, cells)
                total += loss.item() * latents.shape[0]
                count += latents.shape[0]
        return total / count


def held_out_records(config, records: list, scan) -> tuple[list, list]:
    """(training records, held-out records) for a trainer's config: `validation_dataset` scanned with `scan`, or
    `validation_split` of `records`, or no held-out images."""
    from pathlib import Path

    if config.validation_dataset:
        held = scan(Path(config.validation_dataset), config.missing_captions, config.caption_extension).records
        if not held:
            raise ValueError(f"validation_dataset {config.validation_dataset!r} has no usable images; add some or "
                             "unset it")
        return records, held
    if config.validation_split:
        return split_held_out(records, config.validation_split, config.seed)
    return records, []


def held_out_evaluator(config, held_dataset, model, denoiser, accelerator, averaged_weights, extra_modules=()):
    """A no-argument function giving the held-out loss of the weights a file saved now would hold:
    `averaged_weights()` is a context manager that swaps them in (the EMA's, or nothing to do). Model parts
    and `extra_modules` (the LoRA network, whose dropouts must be off) are in eval mode for the evaluation."""
    import contextlib

    from mixkit.training.eval_mode import eval_mode

    loss = HeldOutLoss(held_dataset, batch_size=config.batch_size, seed=config.seed)

    def evaluate() -> float:
        plain = accelerator.unwrap_model(denoiser)
        with eval_mode(model.unet, *model.text_encoders, *extra_modules), \
                averaged_weights() if averaged_weights else contextlib.nullcontext(), accelerator.autocast():
            return loss(plain, model, accelerator.device, min_timestep=config.min_timestep,
                        max_timestep=config.max_timestep, masked=config.masked_loss,
                        unmasked_weight=config.masked_loss_unmasked_weight,
                        normalize_masks=config.masked_loss_normalize)

    return evaluate
