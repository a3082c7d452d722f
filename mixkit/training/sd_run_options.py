"""Settings the SD trainers share beyond the core math: data, steps, optimizer, validation, logs, caching, saving.

A keyword-only dataclass mixed into `SDLoraTrainingConfig`, `SDTextualInversionConfig` and `SDFinetuneConfig`, so
each config keeps its own required positional fields (model, dataset, output) and the shared fields, their
defaults and their checks exist once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mixkit.registry import Registry
from mixkit.training.config_checks import (check_bools, check_caption_files, check_diffusion_training, check_int_in,
                                           check_non_negative_numbers, check_number_in, check_positive_ints)
from mixkit.training.sd_objective_options import SDObjectiveOptions

LOG_TARGETS: Registry[str] = Registry("training log target")
LOG_TARGETS.register("tensorboard", "TensorBoard event files under logging_dir (pip install tensorboard)")


@dataclass(kw_only=True)
class SDRunOptions(SDObjectiveOptions):
    """`optimizer` by name (see `optimizers.OPTIMIZERS`); validation every `validation_every` steps (0 = off).

    The step's objective (timesteps, noise, loss, masks, augmentation) comes from `SDObjectiveOptions`."""

    # The data, batch, step and checkpoint settings every SD trainer has, with the same defaults.
    # One side (512: a square), or kohya's width,height as [width, height] (its "512,768"; a kohya config's string is
    # translated): without bucketing every image is centre-cropped to that size, with bucketing it is the buckets' area.
    resolution: int | list[int] = 512
    missing_captions: str = "folder_name"
    # kohya's caption_extension: `photo.png` is captioned by `photo<caption_extension>` (kohya's default: .caption)
    caption_extension: str = ".txt"
    batch_size: int = 1
    gradient_accumulation_steps: int = 1
    max_steps: int = 100
    # Steps of linear warm-up, or (a float below 1) kohya's ratio of the run's steps: 0.1 warms up over the first 10%.
    warmup_steps: int | float = 0
    seed: int = 0
    min_snr_gamma: float | None = None
    gradient_checkpointing: bool = False
    checkpoint_every: int = 0
    checkpoint_dir: str | None = None
    resume_from: str | None = None
    optimizer: str = "adamw"
    # Settings of the optimizer's constructor over mixkit's defaults (kohya's --optimizer_args, whose list
    # ["weight_decay=0.1", "betas=(0.9, 0.99)"] a kohya config translates to this): {"weight_decay": 0.1}.
    optimizer_args: dict = field(default_factory=dict)
    # After `warmup_steps`: "constant" (the default, as before), "cosine" or "linear" to 0 at max_steps, or kohya's
    # "constant_with_warmup", "cosine_with_restarts" (`lr_schedule_num_cycles` decays) and "polynomial"
    # ((1 - progress) ** `lr_schedule_power`). A rate that ends low averages the last steps' noise out of the
    # weights (kohya's --lr_scheduler, --lr_scheduler_num_cycles, --lr_scheduler_power).
    lr_schedule: str = "constant"
    lr_schedule_num_cycles: int = 1
    lr_schedule_power: float = 1.0
    # Keyword settings of the schedule (kohya's --lr_scheduler_args, whose list ["num_cycles=1"] a kohya config
    # translates to this): the plain cosine's "num_cycles" (0.5: down to 0 once) and the polynomial's "lr_end"
    # (`lr_schedules.SCHEDULE_ARGS`).
    lr_schedule_args: dict = field(default_factory=dict)
    # Prompts of the sample images, one per image, in kohya's sample-prompt syntax: "a dog --n blurry --w 512 --h 768
    # --s 28 --l 7.5 --d 42" (negative prompt, size, steps, guidance scale, seed; `sample_prompts.parse_sample_prompt`).
    validation_prompts: list[str] = field(default_factory=list)
    # A kohya --sample_prompts text file: one prompt a line in the same syntax, "#" lines and blank lines skipped;
    # its prompts follow `validation_prompts`.
    sample_prompts: str | None = None
    validation_every: int = 0
    # kohya's sample_every_n_epochs: sample images after every N-th epoch instead (validation_every is then ignored,
    # as kohya ignores sample_every_n_steps); kohya's sample_at_first: also before the first step.
    validation_every_epochs: int = 0
    validation_at_start: bool = False
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
    # Also write the result every this many steps (0: only at the end), next to `output` and named by its step
    # (kohya's save_every_n_steps): the LoRA trainer's `<stem>-step00000500.safetensors`, the fine-tune's
    # `<output>-step00000500/` model folder. A run's curve to choose from, loadable as it is (a resume state is not).
    save_every_n_steps: int = 0
    # Epochs, kohya's way: `max_train_epochs` (when set) decides max_steps from the dataset's size (one epoch = one
    # pass over its batches, repeats included); `save_every_n_epochs` writes the result at the end of every N-th epoch,
    # as `<stem>-epoch000002.safetensors` (LoRA) or `<output>-epoch000002/` (fine-tune). See `epochs`.
    max_train_epochs: int | None = None
    save_every_n_epochs: int = 0
    # kohya's save_n_epoch_ratio: about this many files over the run, i.e. save_every_n_epochs = floor(epochs / N)
    # (at least 1), decided once the run's epochs are known (`run_schedule.resolve_epochs`); 0: off.
    save_n_epoch_ratio: int = 0
    # Validation loss (kohya's validation_split / validate_every_n_steps): the denoising loss of held-out images,
    # `validation_split` of the dataset (chosen by the seed, never trained on) or a separate `validation_dataset`,
    # with fixed timesteps and noise (`validation_loss.HeldOutLoss`), at the start, every `validation_loss_every`
    # steps (0: no others) and at the end; in the result's `validation_losses` and TensorBoard.
    validation_split: float = 0.0
    validation_dataset: str | None = None
    validation_loss_every: int = 0
    # Gradient clipping by global norm (kohya's max_grad_norm; 0: no clipping).
    max_grad_norm: float = 1.0

    def check_sd_training(self, *, positive_ints: tuple[str, ...] = (), non_negative: tuple[str, ...] = ()) -> None:
        """The checks every SD trainer's config shares, so each trainer refuses the same setting with the same
        message: its caption files, batch and step counts, learning rate and objective, precision, schedule and
        these run options. `learning_rate` and `mixed_precision` are each config's own (their defaults differ);
        `positive_ints` / `non_negative` name the trainer's own settings of those kinds."""
        check_caption_files(self)
        check_positive_ints(self, ("batch_size", "gradient_accumulation_steps", "max_steps",
                                   *positive_ints))
        check_non_negative_numbers(self, ("learning_rate", "noise_offset", "min_snr_gamma", *non_negative))
        check_diffusion_training(self)
        self.check_run_options()

    def check_run_options(self) -> None:
        """Raise ValueError/TypeError naming the first run option out of range."""
        from mixkit.training.lr_schedules import LR_SCHEDULES, POLYNOMIAL_END_LR, check_schedule_args
        from mixkit.training.optimizers import OPTIMIZERS, check_optimizer_args

        OPTIMIZERS.get(self.optimizer)
        check_optimizer_args(self.optimizer, self.optimizer_args, self.learning_rate)
        LR_SCHEDULES.get(self.lr_schedule)
        check_int_in(self, "lr_schedule_num_cycles", 1, 1_000_000, "(the cosine_with_restarts decays; 1: plain cosine)")
        check_number_in(self, "lr_schedule_power", "(0, inf)", "(the polynomial's exponent; 1: linear)")
        check_schedule_args(self.lr_schedule, self.lr_schedule_args)
        self.check_adafactor_schedule()
        end_lr = self.lr_schedule_args.get("lr_end", POLYNOMIAL_END_LR)
        if self.lr_schedule == "polynomial" and not self.learning_rate > end_lr:
            raise ValueError(f"lr_schedule='polynomial' decays to {end_lr} (as kohya's; lr_schedule_args lr_end), so "
                             f"learning_rate must be above it, got {self.learning_rate!r}")
        if self.log_with is not None:
            LOG_TARGETS.get(self.log_with)
        check_bools(self, ("cache_latents", "cache_latents_to_disk"))
        self.check_objective_options()
        check_number_in(self, "max_grad_norm", "[0, inf)", "(1.0 is kohya's default; 0: no clipping)")
        check_number_in(self, "validation_split", "[0, 1)", "(the fraction of the dataset held out; 0.1 is common, "
                                                            "0: none)")
        split = self.validation_split
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
        every = self.save_every_n_steps
        if isinstance(every, bool) or not isinstance(every, int) or every < 0:
            raise ValueError(f"save_every_n_steps must be an integer >= 0 (0: the result at the end only), got {every!r}")
        if self.max_train_epochs is not None:
            check_int_in(self, "max_train_epochs", 1, 1_000_000, "(or None to count max_steps)")
        check_int_in(self, "save_every_n_epochs", 0, 1_000_000, "(0: off)")
        check_int_in(self, "save_n_epoch_ratio", 0, 1_000_000, "(about that many epoch files over the run; 0: off)")
        if not isinstance(self.validation_prompts, list) or not all(isinstance(p, str) for p in self.validation_prompts):
            raise TypeError(f"validation_prompts must be a list of strings, got {self.validation_prompts!r}")
        self.sample_prompt_list()  # a malformed option or unreadable file fails here, before any model loads
        for name in ("validation_every", "validation_every_epochs", "validation_seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        if not isinstance(self.validation_at_start, bool):
            raise TypeError(f"validation_at_start must be true or false, got {self.validation_at_start!r}")
        check_int_in(self, "validation_steps", 1, 1000)
        scale = self.validation_guidance_scale
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 1.0 <= scale <= 100.0:
            raise ValueError(f"validation_guidance_scale must be a number in 1..100 (1 = no guidance), got {scale!r}")
        for name, off in (("validation_every", 0), ("validation_every_epochs", 0), ("validation_at_start", False)):
            if getattr(self, name) != off and not self.sample_prompt_list():
                raise ValueError(f"{name}={getattr(self, name)} needs at least one entry in validation_prompts or a "
                                 f"sample_prompts file (or set {name}={off} to turn these images off)")

    def relative_step_adafactor(self) -> bool:
        """Whether the optimizer is an Adafactor that picks its own step size (kohya's default for Adafactor)."""
        from mixkit.training.optimizers import relative_step_adafactor

        return self.optimizer == "adafactor" and relative_step_adafactor(self.optimizer_args)

    def lr_schedule_to_run(self) -> str:
        """The schedule the run steps: `lr_schedule`, but "adafactor" for an Adafactor picking its own step size when
        lr_schedule is left "constant" (both tools' default), as kohya's get_optimizer switches to its adafactor
        scheduler; another schedule is refused by `check_adafactor_schedule` rather than silently dropped."""
        return "adafactor" if self.relative_step_adafactor() and self.lr_schedule == "constant" else self.lr_schedule

    def check_adafactor_schedule(self) -> None:
        """kohya's Adafactor with relative_step (its default there) picks its own step size and runs lr_scheduler
        "adafactor", which only reports it; the two go together, and that schedule has no warm-up."""
        relative = self.relative_step_adafactor()
        if self.lr_schedule == "adafactor" and not relative:
            raise ValueError("lr_schedule='adafactor' reports the step size Adafactor picks itself: set optimizer: "
                             "adafactor without optimizer_args relative_step=False (kohya's default), or choose "
                             "another lr_schedule")
        if relative and self.lr_schedule_to_run() != "adafactor":
            raise ValueError(f"optimizer='adafactor' picks its own step size (relative_step, kohya's default for "
                             f"it, or warmup_init), so lr_schedule={self.lr_schedule!r} would not act (kohya drops "
                             "it for its adafactor scheduler); set lr_schedule: adafactor (or leave it constant), or "
                             "optimizer_args {\"relative_step\": false, \"scale_parameter\": false} to train at "
                             "learning_rate on this schedule")
        if self.lr_schedule_to_run() == "adafactor" and self.warmup_steps:
            raise ValueError(f"lr_schedule='adafactor' (what Adafactor picking its own step size runs) takes no "
                             f"warm-up (kohya refuses one too), got warmup_steps={self.warmup_steps!r}; set "
                             "warmup_steps: 0 (warmup_init=True is Adafactor's own), or optimizer_args "
                             "relative_step=False")

    def sample_prompt_list(self) -> list:
        """The run's sample prompts, parsed (`SamplePrompt`s): `validation_prompts`, then the `sample_prompts` file's."""
        from mixkit.training.sample_prompts import parse_sample_prompt, read_sample_prompts_file

        prompts = [parse_sample_prompt(line, source="validation_prompts") for line in self.validation_prompts]
        if self.sample_prompts is not None:
            if not isinstance(self.sample_prompts, str):
                raise TypeError(f"sample_prompts must be the path of a text file of prompts, got {self.sample_prompts!r}")
            if self.sample_prompts.strip():  # "" is kohya's (and kohya_ss GUI's) "no prompts file", not the path "."
                prompts += read_sample_prompts_file(self.sample_prompts)
        return prompts
