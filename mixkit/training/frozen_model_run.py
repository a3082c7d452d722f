"""The run the SD trainers share: data and accelerator set up, frozen model, optimizer, resume, loop, saving.

The LoRA trainer (adapters) and the textual-inversion trainer (a word's vectors) both train a small thing attached
to a frozen Stable Diffusion model; they differ only in what they attach, what trains and what file they write.
Everything else lives here once, so a fix to resume, intermediate saves or clean-up reaches both. Each trainer
keeps its numbered steps and calls these in order; the full fine-tune (which writes a model folder and trains
the UNet itself) uses the held-out, optimizer and resume parts.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import torch

from mixkit.data import BucketedImageDataset
from mixkit.training.accelerator_setup import make_accelerator, resolve_mixed_precision
from mixkit.training.denoising_loop import check_stop_at_step, run_denoising_loop
from mixkit.training.lr_schedules import warmup_schedule
from mixkit.training.optimizers import make_optimizer
from mixkit.training.run_reporting import StepReporter
from mixkit.training.run_schedule import intermediate_saves, resolve_epochs, validation_points
from mixkit.training.training_result import TrainingResult
from mixkit.training.training_schedule import with_training_schedule
from mixkit.training.training_state import resume_run
from mixkit.training.validation_loss import held_out_evaluator

logger = logging.getLogger(__name__)


@dataclass
class RunSetup:
    """What a run knows before its model loads: `config` with its epochs resolved to steps (`resolve_epochs`)."""

    config: object
    accelerator: object
    precision: str  # what runs: "auto" resolved
    dataset: object
    held_dataset: BucketedImageDataset | None
    batches_per_epoch: int
    reporter: StepReporter
    run_name: str  # the output's name in sample images, logs and metadata (kohya's output_name)
    started: float


def intermediate_output(output: str | Path, suffix: str) -> Path:
    """Where a file written before the end goes (`run_schedule.intermediate_saves` names it, e.g. "step00000500"):
    next to the output, `<stem>-<suffix>.safetensors`."""
    output = Path(output)
    return output.with_name(f"{output.stem}-{suffix}{output.suffix}")


def held_out_dataset(config, held_records: list) -> BucketedImageDataset | None:
    """The held-out images (`validation_loss.held_out_records`) bucketed as the training images are; None: none."""
    if not held_records:
        return None
    return BucketedImageDataset(held_records, config.resolution, config.bucket_settings(), source="held-out images",
                                loss_masks=config.masked_loss)


def start_run(config, dataset, held_records: list, *, stop_at_step: int | None) -> RunSetup:
    """The accelerator, the run's length in steps and its reporter, for a file output (`config.output`)."""
    held_dataset = held_out_dataset(config, held_records)
    precision = resolve_mixed_precision(config.mixed_precision)
    accelerator = make_accelerator(mixed_precision=precision,
                                   gradient_accumulation_steps=config.gradient_accumulation_steps)
    batches_per_epoch = dataset.batches_per_epoch(config.batch_size)
    config = resolve_epochs(config, batches_per_epoch, accelerator.num_processes)
    check_stop_at_step(stop_at_step, config.max_steps)
    run_name = config.output_name or Path(config.output).stem
    reporter = StepReporter(config, run_dir=Path(config.output).parent, run_name=run_name,
                            enabled=accelerator.is_main_process,
                            validation_points=validation_points(config, batches_per_epoch, accelerator.num_processes))
    return RunSetup(config, accelerator, precision, dataset, held_dataset, batches_per_epoch, reporter, run_name,
                    started=time.time())


def load_frozen_model(config, model=None):
    """`model` (a caller's, left as it was) or `config.model` loaded, with the run's training schedule and every
    weight frozen. Returns it and whether this run loaded it (only then may its weights change dtype)."""
    owns_model = model is None
    if model is None:
        from mixkit.models.diffusion.loading import load_diffusion_model

        model = load_diffusion_model(config.model)
    model = with_training_schedule(model, config.prediction_type, config.zero_terminal_snr)
    config.caption_encoding().check_layers(model.text_encoders)
    for module in [model.unet, model.vae, *model.text_encoders]:
        module.requires_grad_(False)
    return model, owns_model


def optimizer_with_schedule(config, parameter_groups: list[dict]):
    """`config.optimizer` over `parameter_groups` and its learning-rate schedule (warm-up, then `lr_schedule`)."""
    optimizer = make_optimizer(config.optimizer, parameter_groups, config.learning_rate, config.optimizer_args)
    schedule = config.lr_schedule_to_run()
    if schedule != config.lr_schedule:
        logger.info("optimizer='adafactor' picks its own step size: lr_schedule %r -> 'adafactor' (kohya switches to "
                    "its adafactor scheduler the same way)", config.lr_schedule)
    lr_schedule = warmup_schedule(optimizer, schedule, config.warmup_steps, config.max_steps,
                                  num_cycles=config.lr_schedule_num_cycles, power=config.lr_schedule_power,
                                  schedule_args=config.lr_schedule_args, initial_lr=config.learning_rate)
    return optimizer, lr_schedule


# What the optimizer's and schedule's restored state decides: a resume with other values is refused
# (`training_state.check_same_settings`). max_steps may grow (the schedule is stretched, as documented).
RESUMED_SETTINGS = ("optimizer", "optimizer_args", "learning_rate", "unet_learning_rate",
                    "text_encoder_learning_rate", "word_vectors_learning_rate", "loraplus_lr_ratio",
                    "loraplus_unet_lr_ratio", "loraplus_text_encoder_lr_ratio", "lr_schedule", "lr_schedule_num_cycles",
                    "lr_schedule_power", "lr_schedule_args", "warmup_steps")


def resume(config, fingerprint: str, optimizer, lr_schedule, load_trainable: Callable[[dict], None]) -> int:
    """The step to start from: 0, or `config.resume_from`'s, after restoring its optimizer, schedule and RNGs and
    handing its trained tensors to `load_trainable`."""
    if not config.resume_from:
        return 0
    settings = {name: getattr(config, name) for name in RESUMED_SETTINGS if hasattr(config, name)}
    trainable, step = resume_run(config.resume_from, fingerprint, optimizer=optimizer, lr_schedule=lr_schedule,
                                 max_steps=config.max_steps, settings=settings)
    load_trainable(trainable)
    return step


def train_attached(setup: RunSetup, *, model, attached, denoiser, optimizer, lr_schedule, step: int,
                   stop_at_step: int | None, fingerprint: str, clipped: Callable[[], Iterable[torch.nn.Parameter]],
                   trainable_state: Callable[[], dict], save: Callable[[Path, int, str], Path], skipped_images: list,
                   averaged_weights=None, eval_modules: tuple = (), after_optimizer_step=None, prior_reference=None,
                   rewrite_captions=None, should_stop: Callable[[], bool] | None = None,
                   on_step: Callable[[int, int, float], None] | None = None,
                   save_when_interrupted: bool = False, draw_offset: int = 0) -> TrainingResult:
    """Train what is `attached` to the frozen `model` (it has `detach()`) from `step`, writing the result with
    `save(path, at_step, kind)` ("step", "epoch" or "final") along the way and at the end (main process only).

    `should_stop()` is asked before each step (a server's Interrupt; `result.interrupted` then says so);
    `save_when_interrupted` writes the final file from what an interrupted run reached, if any step ran.
    `on_step(step, max_steps, loss)` reports each finished step. `draw_offset`: see `run_denoising_loop`.

    The model comes back as it was, also on errors (disk full, interrupt): `attached` detached, the UNet in eval
    mode without gradient checkpointing. `averaged_weights` (a context manager factory) swaps in what a saved file
    holds for sample images and the held-out loss; `eval_modules` are switched to eval mode for them.
    """
    config, accelerator, reporter = setup.config, setup.accelerator, setup.reporter
    checkpoint_dir = Path(config.checkpoint_dir or Path(config.output).with_suffix("").as_posix() + "-checkpoints")
    result = TrainingResult(output=None, steps=step, first_step=step, skipped_images=list(skipped_images))
    reporter.model = model
    reporter.averaged_weights = averaged_weights
    reporter.eval_modules = list(eval_modules)
    if setup.held_dataset is not None:
        reporter.held_out_loss = held_out_evaluator(config, setup.held_dataset, model, denoiser, accelerator,
                                                    averaged_weights, extra_modules=tuple(eval_modules))
    saves = intermediate_saves(config, setup.batches_per_epoch, accelerator.num_processes)

    def after_step(at_step: int, *logged) -> None:
        reporter(at_step, *logged)
        if on_step is not None:
            on_step(at_step, config.max_steps, logged[0])
        for suffix in saves.get(at_step, []) if accelerator.is_main_process else []:
            kind = "epoch" if suffix.startswith("epoch") else "step"
            result.intermediate_outputs.append(save(intermediate_output(config.output, suffix), at_step, kind))

    try:
        if setup.held_dataset is not None and step == 0:
            reporter.record_validation_loss(0)  # the base model's, for comparison
        reporter.before_first_step(step)
        step = run_denoising_loop(
            config, accelerator=accelerator, model=model, denoiser=denoiser, dataset=setup.dataset,
            optimizer=optimizer, lr_schedule=lr_schedule, step=step, stop_at_step=stop_at_step,
            checkpoint_dir=checkpoint_dir, fingerprint=fingerprint, clipped=clipped, trainable_state=trainable_state,
            result=result, after_optimizer_step=after_optimizer_step, after_step=after_step,
            prior_reference=prior_reference, rewrite_captions=rewrite_captions, should_stop=should_stop,
            draw_offset=draw_offset)
        result.steps = step
        result.validation_losses = list(reporter.validation_losses)
        result.interrupted = step < (stop_at_step or config.max_steps)
        reached = save_when_interrupted and result.interrupted and step > result.first_step
        if (step == config.max_steps or reached) and accelerator.is_main_process:
            result.output = save(config.output, step, "final")
    finally:
        reporter.close()
        _put_back(model, attached, config)
    result.seconds = time.time() - setup.started
    return result


@contextlib.contextmanager
def put_back_on_failure(model, attached, config):
    """Between `attached.attach()` and `train_attached`: an error (a resume file of another run, an optimizer that
    cannot be made) gives the caller's model back as `train_attached` does at its end, not with hooks left on it."""
    try:
        yield
    except BaseException:
        _put_back(model, attached, config)
        raise


def _put_back(model, attached, config) -> None:
    attached.detach()
    model.unet.eval()
    if config.gradient_checkpointing:
        model.unet.disable_gradient_checkpointing()
