"""What each SD training step optimises, shared by both SD trainers: timesteps, noise, loss, masks, augmentation.

A keyword-only dataclass that `SDRunOptions` extends, so the options of the step's objective (kohya's names
wherever kohya has the option), their defaults and their checks exist once. The defaults are plain SD
training: uniform timesteps, Gaussian noise, squared error, whole images, captions as written.
"""

from __future__ import annotations

from dataclasses import dataclass

from mixkit.registry import Registry
from mixkit.training.config_checks import check_bools, check_int_in, check_number_in
from mixkit.training.text_conditioning import MAX_TOKEN_LENGTHS
from mixkit.training.training_schedule import PREDICTION_TYPES, training_scheduler_config

TIMESTEP_SAMPLINGS: Registry[str] = Registry("timestep sampling")
TIMESTEP_SAMPLINGS.register("uniform", "independent uniform draws in [min_timestep, max_timestep) (kohya, diffusers)")
TIMESTEP_SAMPLINGS.register("stratified", "one uniform offset per batch, rows spread evenly over the range (VDM)")

LOSS_TYPES: Registry[str] = Registry("loss type")
LOSS_TYPES.register("l2", "squared error (kohya's and diffusers' default)")
LOSS_TYPES.register("huber", "pseudo-Huber 2c(sqrt(d^2 + c^2) - c): squared near 0, linear for outliers "
                             "(Khrapov et al. 2024)")
LOSS_TYPES.register("smooth_l1", "2(sqrt(d^2 + c^2) - c): pseudo-Huber without the factor c")

HUBER_SCHEDULES: Registry[str] = Registry("huber schedule")
HUBER_SCHEDULES.register("snr", "c from about 1 at low noise to huber_c at high noise, by the noise level "
                                "(kohya's default)")
HUBER_SCHEDULES.register("exponential", "c = exp(-alpha t), from 1 at t = 0 to huber_c at the last timestep")
HUBER_SCHEDULES.register("constant", "c = huber_c at every timestep")


@dataclass(kw_only=True)
class SDObjectiveOptions:
    """The per-step objective; see each group's comment, and `diffusion_objective` for the formulas."""

    # Train on timesteps drawn uniformly from [min_timestep, max_timestep) only (kohya's --min_timestep /
    # --max_timestep; None: the scheduler's num_train_timesteps). Composition and shape are decided at high
    # noise, texture at low noise, so a run can spend its steps on one or the other (measured on the tiny
    # heart LoRA: no gain there, README).
    min_timestep: int = 0
    max_timestep: int | None = None
    # "uniform" (independent draws, as kohya and diffusers do) or "stratified": one draw per batch spread
    # evenly over the range (VDM's low-discrepancy sampler), less noise in each step's gradient.
    timestep_sampling: str = "uniform"
    # Masked training (kohya's --masked_loss / --alpha_mask, OneTrainer's masked training): the loss counts each
    # image's masked part only, from `<stem>-masklabel.png` beside it or its alpha channel (`mixkit.data.loss_masks`).
    # The background keeps `masked_loss_unmasked_weight` (0..1) of its weight; `masked_loss_normalize` divides each
    # image's weights by their mean, so a small subject counts as much as a large one.
    masked_loss: bool = False
    masked_loss_unmasked_weight: float = 0.0
    masked_loss_normalize: bool = False
    # Caption augmentation for tag captions (kohya's names; `mixkit.data.caption_augmentation`): shuffle the tags after
    # the first `keep_tokens` (or around `keep_tokens_separator`), drop single tags / whole captions with these
    # probabilities, add `caption_prefix` / `caption_suffix`. Drawn from (seed, micro-batch, row), so resume stays
    # exact; held-out images for the validation loss are never augmented.
    shuffle_caption: bool = False
    keep_tokens: int = 0
    caption_tag_dropout_rate: float = 0.0
    caption_dropout_rate: float = 0.0
    caption_separator: str = ","
    caption_prefix: str = ""
    caption_suffix: str = ""
    keep_tokens_separator: str = ""
    # Mirror each training image left to right with probability 1/2 (kohya's flip_aug; `flip_augmentation`).
    flip_aug: bool = False
    # Aspect-ratio bucketing as kohya's BucketManager (its enable_bucket and knobs; `mixkit.data.bucketing`): buckets
    # of `bucket_step` multiples between min_bucket_reso and max_bucket_reso with area up to resolution² (the square
    # bucket is the resolution rounded down to the step); `bucket_no_upscale` gives each image its own size instead
    # (scaled to area resolution² if larger, one side on the step), so small images are never blown up; an image
    # with a side below the step has no such size and is refused before training (kohya's would make an empty
    # bucket). Resos outside the resolution are refused (as kohya), checked with the config. Off: every image is
    # cropped to resolution².
    bucketing: bool = False
    bucket_step: int = 64
    min_bucket_reso: int = 256
    max_bucket_reso: int = 1024
    bucket_no_upscale: bool = False
    # The loss (kohya's loss_type / huber_c / huber_schedule): "l2", or the scheduled pseudo-Huber "huber" /
    # "smooth_l1", robust to a few bad images or captions (`diffusion_objective.elementwise_loss`).
    loss_type: str = "l2"
    huber_c: float = 0.1
    huber_schedule: str = "snr"
    # Input perturbation (Ning et al. 2023, kohya's ip_noise_gamma): the UNet sees latents noised with
    # noise + gamma * extra noise but learns to predict the noise alone, which lessens exposure bias (0.1 is usual).
    ip_noise_gamma: float = 0.0
    # kohya's ip_noise_gamma_random_strength: gamma times one uniform draw in [0, 1) per batch.
    ip_noise_gamma_random_strength: bool = False
    # Noise offset (Guttenberg 2023; 0.05-0.1 usual, 0: off): lets the model learn very dark and bright images.
    noise_offset: float = 0.0
    # kohya's noise-offset variants (`diffusion_objective.offset_noise`): noise_offset times a uniform draw per batch,
    # and adaptive_noise_scale times |each latent channel's mean| added per sample (may be negative; clamped at 0).
    noise_offset_random_strength: bool = False
    adaptive_noise_scale: float = 0.0
    # Multi-resolution noise (kohya's multires_noise_iterations, 6-10 usual; 0: off) with its per-level discount.
    multires_noise_iterations: int = 0
    multires_noise_discount: float = 0.3
    # Debiased estimation (Yu et al. 2024; kohya's debiased_estimation_loss): weights 1/sqrt(SNR) per sample.
    debiased_estimation_loss: bool = False
    # The target the UNet learns: None keeps the model's (its scheduler config's prediction_type); "v_prediction"
    # is kohya's --v_parameterization. `zero_terminal_snr` (kohya's) rescales the schedule so the last timestep is
    # pure noise (Lin et al. 2024) and needs v-prediction. A fine-tune writes both into its model folder's
    # scheduler config; a LoRA records them (ss_v_parameterization, ss_zero_terminal_snr) and is meant for a base
    # model sampled the same way (`training_schedule`).
    prediction_type: str | None = None
    zero_terminal_snr: bool = False
    # Which text-encoder layer conditions the UNet (A1111's "Clip skip", kohya's clip_skip; 2 for models trained
    # that way, e.g. NovelAI-derived anime models) and how many caption tokens reach it (kohya's max_token_length:
    # 75, 150 or 225, in 75-token chunks as inference cuts a prompt; `text_conditioning`). A fine-tune records
    # clip_skip as its folder's recommended setting, so generation uses it unless told otherwise.
    clip_skip: int = 1
    max_token_length: int = 75

    def caption_augmentation(self):
        from mixkit.data.caption_augmentation import CaptionAugmentation

        return CaptionAugmentation(self.shuffle_caption, self.keep_tokens, self.caption_tag_dropout_rate,
                                   self.caption_dropout_rate, self.caption_separator, self.caption_prefix,
                                   self.caption_suffix, self.keep_tokens_separator)

    def bucket_settings(self):
        from mixkit.data import BucketSettings

        return BucketSettings(self.bucketing, step=self.bucket_step, min_side=self.min_bucket_reso,
                              max_side=self.max_bucket_reso, no_upscale=self.bucket_no_upscale)

    def caption_encoding(self):
        from mixkit.training.text_conditioning import CaptionEncoding

        return CaptionEncoding(self.clip_skip, self.max_token_length)

    def check_objective_options(self) -> None:
        """Raise ValueError/TypeError naming the first objective option out of range."""
        TIMESTEP_SAMPLINGS.get(self.timestep_sampling)
        LOSS_TYPES.get(self.loss_type)
        HUBER_SCHEDULES.get(self.huber_schedule)
        self.caption_augmentation().check()
        check_bools(self, ("masked_loss", "masked_loss_normalize", "flip_aug", "debiased_estimation_loss",
                           "zero_terminal_snr", "bucketing", "bucket_no_upscale"))
        if self.bucket_no_upscale and not self.bucketing:
            raise ValueError("bucket_no_upscale sizes the buckets; it needs bucketing: true")
        if self.bucketing:
            from mixkit.data.bucketing import check_bucket_inputs

            check_bucket_inputs(self.resolution, self.bucket_step, self.min_bucket_reso, self.max_bucket_reso)
        if self.prediction_type is not None and self.prediction_type not in PREDICTION_TYPES:
            raise ValueError(f"prediction_type must be one of {', '.join(PREDICTION_TYPES)} (or None for the "
                             f"model's own), got {self.prediction_type!r}")
        if self.zero_terminal_snr and self.prediction_type == "epsilon":
            training_scheduler_config({}, self.prediction_type, self.zero_terminal_snr)  # raises, saying why
        low, high = self.min_timestep, self.max_timestep
        if isinstance(low, bool) or not isinstance(low, int) or low < 0:
            raise ValueError(f"min_timestep must be an integer >= 0, got {low!r}")
        if high is not None and (isinstance(high, bool) or not isinstance(high, int) or high <= low):
            raise ValueError(f"max_timestep must be an integer above min_timestep={low} (or None for all "
                             f"timesteps), got {high!r}")
        check_int_in(self, "clip_skip", 1, 48, "(1: the last layer; 2 for models trained with clip skip 2)")
        if self.max_token_length not in MAX_TOKEN_LENGTHS or isinstance(self.max_token_length, bool):
            raise ValueError(f"max_token_length must be one of {', '.join(map(str, MAX_TOKEN_LENGTHS))} (75-token "
                             f"chunks, as kohya allows), got {self.max_token_length!r}")
        check_number_in(self, "huber_c", "(0, 1]", "(0.1 is kohya's default)")
        check_number_in(self, "ip_noise_gamma", "[0, inf)", "(0.1 is usual; 0: off)")
        check_int_in(self, "multires_noise_iterations", 0, 20, "(6-10 is usual; 0: off)")
        check_number_in(self, "multires_noise_discount", "(0, 1]", "(0.3 is kohya's default)")
        check_number_in(self, "masked_loss_unmasked_weight", "[0, 1]", "(the loss weight the unmasked background keeps)")
        check_bools(self, ("ip_noise_gamma_random_strength", "noise_offset_random_strength"))
        check_number_in(self, "adaptive_noise_scale", "(-inf, inf)", "(kohya suggests about a tenth of noise_offset)")
        if (self.noise_offset_random_strength or self.adaptive_noise_scale) and not self.noise_offset:
            raise ValueError("noise_offset_random_strength and adaptive_noise_scale change the noise offset; set "
                             "noise_offset (0.05-0.1 is usual) or leave them off")
        if self.ip_noise_gamma_random_strength and not self.ip_noise_gamma:
            raise ValueError("ip_noise_gamma_random_strength scales ip_noise_gamma; set ip_noise_gamma (0.1 is usual) "
                             "or leave it off")
        if not self.masked_loss and (self.masked_loss_unmasked_weight or self.masked_loss_normalize):
            raise ValueError("masked_loss_unmasked_weight and masked_loss_normalize act on masked training only; "
                             "set masked_loss: true or leave them at their defaults")
