"""The training loop shared by the SD trainers (LoRA and full fine-tune): data order, noise, loss, steps.

The loop owns its data order and randomness instead of delegating them to a DataLoader: each optimizer
step takes its epoch's next micro-batches in the deterministic epoch order (seed, epoch), never crossing
into the next epoch (`run_schedule.step_micro_batches`, kohya's epochs), and each micro-batch's noise,
timesteps and VAE sample come from a generator seeded by (seed, its run-wide index). A resumed run
therefore only needs weights, optimizer, LR schedule and step count to continue exactly. With W
processes, process r takes the epoch's batches r, r + W, ..., the same set one process sees with W-fold
accumulation.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Callable, Iterable

import torch
from torch import nn

from mixkit.data.caption_augmentation import augment_caption
from mixkit.training import diffusion_objective as objective
from mixkit.training.flip_augmentation import flip_draws, flip_rows
from mixkit.training.latent_cache import LatentCache
from mixkit.training.latent_disk_store import LatentDiskStore
from mixkit.training.run_schedule import local_batches_per_epoch, step_micro_batches
from mixkit.training.text_conditioning import CaptionEncoding, encode_sd, encode_sdxl
from mixkit.training.training_state import check_finite_loss, checkpoint_path, save_training_state

SEED_STRIDE = 1_000_003  # a prime, so (seed, micro-batch) pairs map to distinct generator seeds


class ConditionedDenoiser(nn.Module):
    """UNet + text encoders (+ optional adapters): captions in, predicted noise/velocity out.

    One module for what accelerate wraps, so DDP sees every trainable parameter (UNet, adapters).
    """

    def __init__(self, model, train_text_encoder: bool = False, adapters: nn.Module | None = None,
                 encoding: CaptionEncoding = CaptionEncoding()) -> None:
        super().__init__()
        self.encoding = encoding
        self.unet = model.unet
        self.text_encoders = nn.ModuleList(model.text_encoders)
        self.adapters = adapters
        self.tokenizers = model.tokenizers
        self.is_sdxl = model.family.value == "sdxl"
        self.train_text_encoder = train_text_encoder

    def forward(self, noisy_latents, timesteps, captions, original_sizes, crops):
        with torch.set_grad_enabled(self.train_text_encoder and torch.is_grad_enabled()):
            if self.is_sdxl:
                target_size = (noisy_latents.shape[-2] * 8, noisy_latents.shape[-1] * 8)
                cond = encode_sdxl(list(self.text_encoders), self.tokenizers, captions, noisy_latents.device,
                                   original_sizes, crops, target_size, self.encoding)
            else:
                cond = encode_sd(list(self.text_encoders), self.tokenizers, captions, noisy_latents.device,
                                 self.encoding)
        return self.unet(noisy_latents, timesteps, **cond).sample


def _base_model_targets(reference, target: torch.Tensor, batch: dict, noisy: torch.Tensor,
                        timesteps: torch.Tensor) -> torch.Tensor:
    """`target` with the prior samples' rows replaced by the base model's prediction for the same input."""
    rows = batch["prior"].nonzero().flatten().tolist()
    pick = lambda values: [values[i] for i in rows]  # noqa: E731
    with torch.no_grad():
        base = reference(noisy[rows], timesteps[rows], pick(batch["captions"]), pick(batch["original_sizes"]),
                         pick(batch["crops"]))
    target = target.clone()
    target[rows] = base.to(target.dtype)
    return target


def _record_or_run(value, run_value):
    """A record's own setting (a kohya dataset-config subset's), else the run's."""
    return run_value if value is None else value


def check_stop_at_step(stop_at_step: int | None, max_steps: int) -> None:
    """`stop_at_step` (end early with a checkpoint, for time-sliced jobs) must lie in 1..max_steps."""
    if stop_at_step is not None and not 0 < stop_at_step <= max_steps:
        raise ValueError(f"stop_at_step must be in 1..max_steps={max_steps}, got {stop_at_step}")


def run_denoising_loop(config, *, accelerator, model, denoiser, dataset, optimizer, lr_schedule, step: int,
                       stop_at_step: int | None, checkpoint_dir: Path, fingerprint: str,
                       clipped: Callable[[], Iterable[torch.nn.Parameter]], trainable_state: Callable[[], dict],
                       result, after_optimizer_step: Callable[[], None] | None = None,
                       after_step: Callable[[int, float, float, float], None] | None = None,
                       prior_reference: Callable[..., torch.Tensor] | None = None,
                       rewrite_captions: Callable[[list[str], int], list[str]] | None = None,
                       should_stop: Callable[[], bool] | None = None, draw_offset: int = 0) -> int:
    """Train from `step` to `stop_at_step` or `config.max_steps`; appends losses and checkpoints to `result`.

    `prior_reference(noisy, timesteps, captions, original_sizes, crops)`, when given, is the frozen base
    model's prediction; class (prior) images are then trained towards it instead of their true target.

    `after_step(step, mean loss, learning rate, seconds)` runs on every process after each optimizer
    step, before that step's checkpoint (logging and validation images, see `run_reporting`).

    `clipped()` gives the trainable parameters (gradient clipping, and the zero gradient of a micro-batch that did not
    use them).

    `rewrite_captions(captions, micro-batch index)`, when given, makes each micro-batch's training captions from
    its (augmented) captions, drawing from the run-wide index so resume stays exact (textual inversion's templates).

    `should_stop()`, when given, is asked before each optimizer step; True ends the loop there (a web UI's Interrupt,
    from another thread). The caller tells an early end by the returned step. One process only: with several, each
    would have to see the same answer at the same step.

    `draw_offset` is how many steps the trained thing had taken before this run (a continued hypernetwork's step):
    step s then takes the data and draws of step `draw_offset + s`, so two runs continuing one file see what one
    unbroken run would.
    """
    from diffusers import DDPMScheduler
    from tqdm.auto import tqdm

    noise_schedule = DDPMScheduler.from_config(model.scheduler_config)
    alphas_cumprod = noise_schedule.alphas_cumprod
    num_timesteps = noise_schedule.config.num_train_timesteps
    low, high = config.min_timestep, config.max_timestep or num_timesteps
    if high > num_timesteps or low >= high:
        raise ValueError(f"min_timestep={config.min_timestep} and max_timestep={config.max_timestep} must lie in "
                         f"0..{num_timesteps}, the model's num_train_timesteps, with min below max")
    world, rank = accelerator.num_processes, accelerator.process_index
    accum = config.gradient_accumulation_steps
    batches_per_epoch = dataset.batches_per_epoch(config.batch_size)
    padded_epoch = local_batches_per_epoch(batches_per_epoch, world) * world
    epoch_cache: dict[int, list[list[int]]] = {}
    vae, scaling = model.vae, model.vae.config.scaling_factor
    latent_cache = None
    if config.cache_latents_to_disk:
        latent_cache = LatentCache(LatentDiskStore.for_vae(vae))
    elif config.cache_latents:
        latent_cache = LatentCache()
    captions = config.caption_augmentation()
    end = stop_at_step or config.max_steps
    bar = tqdm(total=config.max_steps, initial=step, disable=not accelerator.is_local_main_process, desc="train")
    tick = time.perf_counter()
    while step < end and not (should_stop is not None and should_stop()):
        step_loss = 0.0
        epoch, positions = step_micro_batches(draw_offset + step, batches_per_epoch, accum, world)
        # An epoch's last step may accumulate fewer than `accum` micro-batches (kohya's epochs, `run_schedule`);
        # accelerate syncs and steps when its counter reaches a multiple of `accum`, so it starts that much short.
        accelerator.step = accum - len(positions)
        for local in positions:
            # Process `rank` takes the epoch's batches rank, rank + W, ..., wrapping round to the first ones
            # when W does not divide them (accelerate's even batches); `index` numbers the draw run-wide.
            position = (local * world + rank) % batches_per_epoch
            index = epoch * padded_epoch + local * world + rank
            if epoch not in epoch_cache:
                epoch_cache = {epoch: dataset.epoch_batches(epoch, config.batch_size, config.seed)}
            records = epoch_cache[epoch][position]
            batch = dataset.load_batch(records)
            cache_keys = records
            # A kohya dataset-config subset may set its own flip_aug and caption augmentation (`ImageRecord`); the
            # draws are the same either way, so a run whose subsets all agree with the run's settings is unchanged.
            flippable = [_record_or_run(dataset.records[i].flip_aug, config.flip_aug) for i in records]
            if config.flip_aug or any(flippable):
                flips = [drawn and wanted for drawn, wanted in zip(flip_draws(config.seed, index, len(records)),
                                                                    flippable)]
                batch = flip_rows(batch, flips)
                cache_keys = list(zip(records, flips))  # a mirrored image has its own posterior
            row_captions = [_record_or_run(dataset.records[i].captions, captions) for i in records]
            if any(settings.active for settings in row_captions):
                batch["captions"] = [augment_caption(caption, settings, random.Random(f"{config.seed}:{index}:{row}"))
                                     for row, (caption, settings) in enumerate(zip(batch["captions"], row_captions))]
            if rewrite_captions is not None:
                batch["captions"] = rewrite_captions(batch["captions"], index)
            generator = torch.Generator().manual_seed(config.seed * SEED_STRIDE + index)
            with accelerator.accumulate(denoiser):
                with torch.no_grad():
                    pixels = batch["pixels"].to(accelerator.device, vae.dtype)
                    posterior = (latent_cache.posterior(vae, cache_keys, pixels) if latent_cache is not None
                                 else vae.encode(pixels).latent_dist)
                    latents = posterior.sample(generator=generator) * scaling
                noise = objective.offset_noise(latents.shape, generator, config.noise_offset,
                                               random_strength=config.noise_offset_random_strength,
                                               adaptive_scale=config.adaptive_noise_scale, latents=latents)
                timesteps = objective.sample_timesteps(latents.shape[0], low, high, generator,
                                                       stratified=config.timestep_sampling == "stratified")
                if config.multires_noise_iterations:  # drawn after the timesteps: those stay as without it
                    noise = objective.pyramid_noise(noise, generator, config.multires_noise_iterations,
                                                    config.multires_noise_discount)
                noised_with = noise
                if config.ip_noise_gamma:  # drawn after everything else, so runs without it keep their draws
                    extra = torch.randn(noise.shape, generator=generator)
                    if config.ip_noise_gamma_random_strength:  # kohya's: gamma times one uniform draw per batch
                        extra = extra * torch.rand((), generator=generator)
                    noised_with = noise + config.ip_noise_gamma * extra
                noisy = objective.add_noise(latents, noised_with, timesteps, alphas_cumprod)
                prediction = denoiser(noisy, timesteps.to(accelerator.device), batch["captions"],
                                      batch["original_sizes"], batch["crops"])
                target = objective.diffusion_target(latents, noise, timesteps, alphas_cumprod, model.prediction_type)
                if prior_reference is not None and batch["prior"].any():
                    target = _base_model_targets(prior_reference, target, batch, noisy, timesteps.to(accelerator.device))
                weights = batch["loss_weights"]
                if config.min_snr_gamma:
                    weights = weights * objective.min_snr_weights(alphas_cumprod, timesteps, config.min_snr_gamma,
                                                                  model.prediction_type)
                if config.debiased_estimation_loss:
                    weights = weights * objective.debiased_weights(alphas_cumprod, timesteps, model.prediction_type)
                cell_weights = None
                if config.masked_loss:
                    cell_weights = objective.latent_loss_mask(batch["masks"], latents.shape[-2:],
                                                              config.masked_loss_unmasked_weight,
                                                              config.masked_loss_normalize).to(accelerator.device)
                huber_c = (objective.scheduled_huber_c(timesteps, alphas_cumprod, config.huber_c, config.huber_schedule)
                           if config.loss_type != "l2" else None)
                elementwise = objective.elementwise_loss(prediction, target, config.loss_type,
                                                         huber_c.to(prediction.device) if huber_c is not None else None)
                loss = objective.weighted_mean(elementwise, weights, cell_weights)
                if not loss.requires_grad:
                    # No trainable parameter took part (a textual-inversion micro-batch whose captions lack the token
                    # string, e.g. after caption dropout): it gives them zero gradient, as kohya's TI, which trains
                    # the whole embedding table, gives its new rows. The optimizer still steps, so the step count
                    # and optimizer state stay those of every other step, and resume stays exact.
                    loss = loss + sum(parameter.sum() for parameter in clipped()) * 0.0
                accelerator.backward(loss)
                if accelerator.sync_gradients and config.max_grad_norm:
                    accelerator.clip_grad_norm_(clipped(), config.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            step_loss += loss.detach().item() / len(positions)
        # Stepped by hand once per optimizer step: accelerate's scheduler wrapper would step it once
        # per process, making the schedule depend on the number of processes.
        learning_rate = lr_schedule.get_last_lr()[0]
        lr_schedule.step()
        if after_optimizer_step is not None:
            after_optimizer_step()
        step += 1
        mean_loss = accelerator.reduce(torch.tensor(step_loss, device=accelerator.device), "mean").item()
        result.losses.append(mean_loss)
        check_finite_loss(mean_loss, step, last_checkpoint=result.last_checkpoint or config.resume_from,
                          checkpoint_every=config.checkpoint_every)
        seconds = time.perf_counter() - tick
        bar.update(1)
        bar.set_postfix(loss=f"{mean_loss:.4f}", its=f"{1 / max(seconds, 1e-9):.2f}")
        if after_step is not None:
            after_step(step, mean_loss, learning_rate, seconds)
        tick = time.perf_counter()
        due = config.checkpoint_every and step % config.checkpoint_every == 0
        if (due or step == stop_at_step) and accelerator.is_main_process:
            result.last_checkpoint = save_training_state(
                checkpoint_path(checkpoint_dir, step), step=step, fingerprint=fingerprint, trainable=trainable_state(),
                optimizer=getattr(optimizer, "optimizer", optimizer), scheduler=lr_schedule, config_json=config.to_json())
        accelerator.wait_for_everyone()
    bar.close()
    return step
