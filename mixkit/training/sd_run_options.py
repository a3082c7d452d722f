"""Settings both SD trainers share beyond the core math: optimizer, validation images, TensorBoard.

A keyword-only dataclass mixed into `SDLoraTrainingConfig` and `SDFinetuneConfig`, so each config
keeps its own required positional fields (model, dataset, output) and the shared fields, their
defaults and their checks exist once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mixkit.registry import Registry

LOG_TARGETS: Registry[str] = Registry("training log target")
LOG_TARGETS.register("tensorboard", "TensorBoard event files under logging_dir (pip install tensorboard)")

TIMESTEP_SAMPLINGS: Registry[str] = Registry("timestep sampling")
TIMESTEP_SAMPLINGS.register("uniform", "independent uniform draws in [min_timestep, max_timestep) (kohya, diffusers)")
TIMESTEP_SAMPLINGS.register("stratified", "one uniform offset per batch, rows spread evenly over the range (VDM)")

LOSS_TYPES: Registry[str] = Registry("loss type")
LOSS_TYPES.register("l2", "squared error (kohya's and diffusers' default)")
LOSS_TYPES.register("huber", "pseudo-Huber 2c(sqrt(d^2 + c^2) - c): squared near 0, linear for outliers (Khrapov et al. 2024)")
LOSS_TYPES.register("smooth_l1", "2(sqrt(d^2 + c^2) - c): pseudo-Huber without the factor c")

HUBER_SCHEDULES: Registry[str] = Registry("huber schedule")
HUBER_SCHEDULES.register("snr", "c from about 1 at low noise to huber_c at high noise, by the noise level (kohya's default)")
HUBER_SCHEDULES.register("exponential", "c = exp(-alpha t), from 1 at t = 0 to huber_c at the last timestep")
HUBER_SCHEDULES.register("constant", "c = huber_c at every timestep")


@dataclass(kw_only=True)
class SDRunOptions:
    """`optimizer` by name (see `optimizers.OPTIMIZERS`); validation every `validation_every` steps (0 = off)."""

    optimizer: str = "adamw"
    # After `warmup_steps`: "constant" (the default, as before), "cosine" or "linear" to 0 at max_steps.
    # A rate that ends low averages the last steps' noise out of the weights (kohya's --lr_scheduler).
    lr_schedule: str = "constant"
    validation_prompts: list[str] = field(default_factory=list)
    validation_every: int = 0
    validation_steps: int = 20
    validation_seed: int = 0
    validation_guidance_scale: float = 7.0
    log_with: str | None = None
    logging_dir: str | None = None
    # Encode each training image once and keep its posterior in memory (kohya's --cache_latents): the frozen
    # VAE and the trainers' fixed centre crops make that exact; only the sampled latent changes per step.
    cache_latents: bool = False
    # The same posteriors in `<cache root>/latents/` instead of RAM (kohya's --cache_latents_to_disk): later runs on the
    # same images and VAE encoder skip the encoder from their first step (implies cache_latents).
    cache_latents_to_disk: bool = False
    # Train on timesteps drawn uniformly from [min_timestep, max_timestep) only (kohya's --min_timestep /
    # --max_timestep; None: the scheduler's num_train_timesteps). Composition and shape are decided at high
    # noise, texture at low noise, so a run can spend its steps on one or the other (measured on the tiny
    # heart LoRA: no gain there, README).
    min_timestep: int = 0
    max_timestep: int | None = None
    # "uniform" (independent draws, as kohya and diffusers do) or "stratified": one draw per batch spread
    # evenly over the range (VDM's low-discrepancy sampler), less noise in each step's gradient.
    timestep_sampling: str = "uniform"
    # Also write the result every this many steps (0: only at the end), next to `output` and named by its step
    # (kohya's save_every_n_steps): the LoRA trainer's `<stem>-step00000500.safetensors`, the fine-tune's
    # `<output>-step00000500/` model folder. A run's curve to choose from, loadable as it is (a resume state is not).
    save_every_n_steps: int = 0
    # Masked training (kohya's --masked_loss / --alpha_mask, OneTrainer's masked training): the loss counts each
    # image's masked part only, from `<stem>-masklabel.png` beside it or its alpha channel (`mixkit.data.loss_masks`).
    # The background keeps `masked_loss_unmasked_weight` (0..1) of its weight; `masked_loss_normalize` divides each
    # image's weights by their mean, so a small subject counts as much as a large one.
    masked_loss: bool = False
    masked_loss_unmasked_weight: float = 0.0
    masked_loss_normalize: bool = False
    # Validation loss (kohya's validation_split / validate_every_n_steps): the denoising loss of held-out images,
    # `validation_split` of the dataset (chosen by the seed, never trained on) or a separate `validation_dataset`,
    # with fixed timesteps and noise (`validation_loss.HeldOutLoss`), at the start, every `validation_loss_every`
    # steps (0: no others) and at the end; in the result's `validation_losses` and TensorBoard.
    validation_split: float = 0.0
    validation_dataset: str | None = None
    validation_loss_every: int = 0
    # Caption augmentation for tag captions (kohya's names; `mixkit.data.caption_augmentation`): shuffle the tags after
    # the first `keep_tokens`, drop single tags / whole captions with these probabilities. Drawn from (seed, micro-batch,
    # row), so resume stays exact; held-out images for the validation loss are never augmented.
    shuffle_caption: bool = False
    keep_tokens: int = 0
    caption_tag_dropout_rate: float = 0.0
    caption_dropout_rate: float = 0.0
    caption_separator: str = ","
    # Mirror each training image left to right with probability 1/2 (kohya's flip_aug; `flip_augmentation`).
    flip_aug: bool = False
    # The loss (kohya's loss_type / huber_c / huber_schedule): "l2", or the scheduled pseudo-Huber "huber" /
    # "smooth_l1", robust to a few bad images or captions (`diffusion_objective.elementwise_loss`).
    loss_type: str = "l2"
    huber_c: float = 0.1
    huber_schedule: str = "snr"
    # Input perturbation (Ning et al. 2023, kohya's ip_noise_gamma): the UNet sees latents noised with
    # noise + gamma * extra noise but learns to predict the noise alone, which lessens exposure bias (0.1 is usual).
    ip_noise_gamma: float = 0.0
    # Gradient clipping by global norm (kohya's max_grad_norm; 0: no clipping).
    max_grad_norm: float = 1.0
    # Multi-resolution noise (kohya's multires_noise_iterations, 6-10 usual; 0: off) with its per-level discount.
    multires_noise_iterations: int = 0
    multires_noise_discount: float = 0.3
    # Debiased estimation (Yu et al. 2024; kohya's debiased_estimation_loss): weights 1/sqrt(SNR) per sample.
    debiased_estimation_loss: bool = False

    def caption_augmentation(self):
        from mixkit.data.caption_augmentation import CaptionAugmentation

        return CaptionAugmentation(self.shuffle_caption, self.keep_tokens, self.caption_tag_dropout_rate,
                                   self.caption_dropout_rate, self.caption_separator)

    def check_run_options(self) -> None:
        """Raise ValueError/TypeError naming the first run option out of range."""
        from mixkit.training.optimizers import LR_SCHEDULES, OPTIMIZERS

        OPTIMIZERS.get(self.optimizer)
        LR_SCHEDULES.get(self.lr_schedule)
        if self.log_with is not None:
            LOG_TARGETS.get(self.log_with)
        for name in ("cache_latents", "cache_latents_to_disk"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be true or false, got {getattr(self, name)!r}")
        TIMESTEP_SAMPLINGS.get(self.timestep_sampling)
        self.caption_augmentation().check()
        LOSS_TYPES.get(self.loss_type)
        HUBER_SCHEDULES.get(self.huber_schedule)
        c = self.huber_c
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c <= 1:
            raise ValueError(f"huber_c must be a number in (0, 1] (0.1 is kohya's default), got {c!r}")
        levels = self.multires_noise_iterations
        if isinstance(levels, bool) or not isinstance(levels, int) or not 0 <= levels <= 20:
            raise ValueError(f"multires_noise_iterations must be an integer in 0..20 (6-10 is usual; 0: off), got {levels!r}")
        discount = self.multires_noise_discount
        if isinstance(discount, bool) or not isinstance(discount, (int, float)) or not 0 < discount <= 1:
            raise ValueError(f"multires_noise_discount must be a number in (0, 1] (0.3 is kohya's default), "
                             f"got {discount!r}")
        for name in ("ip_noise_gamma", "max_grad_norm"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        for name in ("masked_loss", "masked_loss_normalize", "flip_aug", "debiased_estimation_loss"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be true or false, got {getattr(self, name)!r}")
        floor = self.masked_loss_unmasked_weight
        if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 <= floor <= 1:
            raise ValueError(f"masked_loss_unmasked_weight must be a number in 0..1 (the loss weight the unmasked "
                             f"background keeps), got {floor!r}")
        split = self.validation_split
        if isinstance(split, bool) or not isinstance(split, (int, float)) or not 0 <= split < 1:
            raise ValueError(f"validation_split must be a fraction in [0, 1) of the dataset to hold out (0.1 is "
                             f"common; 0: none), got {split!r}")
        if split and self.validation_dataset:
            raise ValueError("set validation_split (hold out part of the dataset) or validation_dataset (separate "
                             "images), not both")
        if self.validation_dataset is not None and not isinstance(self.validation_dataset, str):
            raise TypeError(f"validation_dataset must be a folder or .jsonl path, got {self.validation_dataset!r}")
        every_loss = self.validation_loss_every
        if isinstance(every_loss, bool) or not isinstance(every_loss, int) or every_loss < 0:
            raise ValueError(f"validation_loss_every must be an integer >= 0, got {every_loss!r}")
        if every_loss and not (split or self.validation_dataset):
            raise ValueError(f"validation_loss_every={every_loss} needs held-out images: set validation_split "
                             "(like 0.1) or validation_dataset")
        if not self.masked_loss and (floor or self.masked_loss_normalize):
            raise ValueError("masked_loss_unmasked_weight and masked_loss_normalize act on masked training only; "
                             "set masked_loss: true or leave them at their defaults")
        every = self.save_every_n_steps
        if isinstance(every, bool) or not isinstance(every, int) or every < 0:
            raise ValueError(f"save_every_n_steps must be an integer >= 0 (0: the result at the end only), got {every!r}")
        low, high = self.min_timestep, self.max_timestep
        if isinstance(low, bool) or not isinstance(low, int) or low < 0:
            raise ValueError(f"min_timestep must be an integer >= 0, got {low!r}")
        if high is not None and (isinstance(high, bool) or not isinstance(high, int) or high <= low):
            raise ValueError(f"max_timestep must be an integer above min_timestep={low} (or None for all "
                             f"timesteps), got {high!r}")
        if not isinstance(self.validation_prompts, list) or not all(isinstance(p, str) for p in self.validation_prompts):
            raise TypeError(f"validation_prompts must be a list of strings, got {self.validation_prompts!r}")
        for name in ("validation_every", "validation_seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        steps = self.validation_steps
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 1000:
            raise ValueError(f"validation_steps must be an integer in 1..1000, got {steps!r}")
        scale = self.validation_guidance_scale
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 1.0 <= scale <= 100.0:
            raise ValueError(f"validation_guidance_scale must be a number in 1..100 (1 = no guidance), got {scale!r}")
        if self.validation_every and not self.validation_prompts:
            raise ValueError(f"validation_every={self.validation_every} needs at least one entry in validation_prompts "
                             "(or set validation_every=0 to turn validation off)")
