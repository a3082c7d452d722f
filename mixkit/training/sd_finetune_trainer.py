"""Full UNet fine-tune (or from-scratch training of a small UNet) of Stable Diffusion, with EMA.

Uses the same deterministic loop as the LoRA trainer (`run_denoising_loop`), so resume is exact;
the EMA shadow weights are part of each checkpoint. The result is a complete diffusers folder
(the base model's other components copied, the UNet replaced by the EMA or the raw weights),
assembled in a temporary folder and renamed into place, so a failed save leaves no partial model.
`save_every_n_steps` / `save_every_n_epochs` write such a folder along the way too (`<output>-step00000500/`).
Validation images and TensorBoard logs go to `<output>-run/` beside it (see `run_reporting`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import shutil
import time
from pathlib import Path

import torch

from mixkit.data import BucketedImageDataset
from mixkit.io.atomic import atomic_output_folder, check_new_output_folder
from mixkit.models.diffusion.recommended import RECOMMENDED_FILE, read_recommended
from mixkit.training.accelerator_setup import make_accelerator
from mixkit.training.dataset_scan import scan_dataset, scan_path
from mixkit.training.denoising_loop import ConditionedDenoiser, check_stop_at_step, run_denoising_loop
from mixkit.training.ema import EmaWeights
from mixkit.training.frozen_model_run import held_out_dataset, optimizer_with_schedule, resume
from mixkit.training.run_reporting import StepReporter
from mixkit.training.run_schedule import intermediate_saves, resolve_epochs, validation_points
from mixkit.training.sd_finetune_config import SDFinetuneConfig
from mixkit.training.training_result import TrainingResult
from mixkit.training.training_schedule import SCHEDULE_KEYS, with_training_schedule
from mixkit.training.training_state import architecture_fingerprint
from mixkit.training.validation_loss import held_out_evaluator, held_out_records

logger = logging.getLogger(__name__)


def _check_paths(config: SDFinetuneConfig) -> None:
    if not (Path(config.model) / "model_index.json").is_file():
        raise ValueError(f"Full fine-tuning needs a diffusers model folder (with model_index.json) as model, "
                         f"got {config.model!r}; convert a single-file checkpoint to a folder first.")
    check_new_output_folder(config.output)


def intermediate_folder(output: str | Path, suffix: str) -> Path:
    """Where a model written before the end goes (`run_schedule.intermediate_saves` names it, e.g. "step00000500"):
    beside the output, `<output>-<suffix>/`."""
    output = Path(output)
    return output.with_name(f"{output.name}-{suffix}")


def _write_model_folder(config: SDFinetuneConfig, unet, output: str | Path, scheduler_config: dict) -> Path:
    """Copy the base model folder, save `unet` and the run's scheduler config into it (the trained prediction
    type and schedule, see `training_schedule`; a clip_skip other than 1 as the recommended one), then rename
    the whole folder into place."""
    with atomic_output_folder(output) as temp:
        shutil.copytree(config.model, temp, dirs_exist_ok=True, ignore=shutil.ignore_patterns("unet"))
        unet.save_pretrained(temp / "unet")
        scheduler_file = temp / "scheduler" / "scheduler_config.json"
        base = json.loads(scheduler_file.read_text(encoding="utf-8")) if scheduler_file.is_file() else None
        changed = {key: scheduler_config[key] for key in SCHEDULE_KEYS if key in scheduler_config}
        if base is not None and any(base.get(key) != value for key, value in changed.items()):
            scheduler_file.write_text(json.dumps({**base, **changed}, indent=2) + "\n", encoding="utf-8")
        if config.clip_skip != 1:  # trained on an earlier layer: generation should read the same one
            recommended = dataclasses.replace(read_recommended(temp), clip_skip=config.clip_skip)
            (temp / RECOMMENDED_FILE).write_text(recommended.to_json(), encoding="utf-8")
        (temp / "mixkit_training_config.json").write_text(config.to_json(), encoding="utf-8")
    return Path(output).expanduser().absolute()


def train_sd_finetune(config: SDFinetuneConfig, *, stop_at_step: int | None = None) -> TrainingResult:
    """Fine-tune (or train from scratch) the UNet of `config.model`; writes the model folder `config.output`."""
    from mixkit.models.diffusion.loading import load_diffusion_model

    # 1. Validate settings, paths and data before loading the model.
    config.check()
    _check_paths(config)
    report = scan_dataset(config)
    records, held_records = held_out_records(config, report.records, scan_path)
    dataset = BucketedImageDataset(records, config.resolution, config.bucket_settings(), source=config.dataset,
                                   loss_masks=config.masked_loss)
    held_dataset = held_out_dataset(config, held_records)
    accelerator = make_accelerator(mixed_precision=config.mixed_precision,
                                   gradient_accumulation_steps=config.gradient_accumulation_steps)
    batches_per_epoch = dataset.batches_per_epoch(config.batch_size)
    config = resolve_epochs(config, batches_per_epoch, accelerator.num_processes)
    check_stop_at_step(stop_at_step, config.max_steps)
    saves = intermediate_saves(config, batches_per_epoch, accelerator.num_processes)
    # The output folder appears only when the model is complete, so images and logs go next to it.
    reporter = StepReporter(config, run_dir=f"{Path(config.output).absolute()}-run", run_name=Path(config.output).name,
                            enabled=accelerator.is_main_process,
                            validation_points=validation_points(config, batches_per_epoch, accelerator.num_processes))
    started = time.time()

    # 2. Model: frozen VAE and text encoders, trainable UNet (re-initialised when training from scratch).
    model = with_training_schedule(load_diffusion_model(config.model), config.prediction_type,
                                   config.zero_terminal_snr)
    config.caption_encoding().check_layers(model.text_encoders)
    for module in [model.vae, *model.text_encoders]:
        module.requires_grad_(False)
    torch.manual_seed(config.seed)
    if config.from_scratch:
        model.unet = type(model.unet).from_config(model.unet.config)
    unet = model.unet.requires_grad_(True).train()
    if config.gradient_checkpointing:
        unet.enable_gradient_checkpointing()
    parameters = [p for p in unet.parameters()]
    ema = EmaWeights(parameters, config.ema_decay) if config.use_ema else None
    optimizer, lr_schedule = optimizer_with_schedule(config, [{"params": parameters}])
    fingerprint = architecture_fingerprint(dict(unet.state_dict()), {"trainer": "sd-finetune", "ema": config.use_ema})

    def trainable_state() -> dict:
        return {**{f"unet.{k}": v for k, v in unet.state_dict().items()}, **(ema.state_dict() if ema else {})}

    def load_trainable(trainable: dict) -> None:
        unet.load_state_dict({k[5:]: v for k, v in trainable.items() if k.startswith("unet.")})
        if ema:
            ema.load_state_dict(trainable)

    # 3. Resume.
    step = resume(config, fingerprint, optimizer, lr_schedule, load_trainable)
    # Checked once the start step is known: a resumed run has written the folders of its earlier steps itself.
    for suffix in [suffix for at, suffixes in saves.items() if at > step for suffix in suffixes]:
        check_new_output_folder(intermediate_folder(config.output, suffix), "The intermediate model folder")
    denoiser, optimizer = accelerator.prepare(ConditionedDenoiser(model, encoding=config.caption_encoding()), optimizer)

    # 4. Train; the EMA follows every optimizer step.
    result = TrainingResult(output=None, steps=step, first_step=step, skipped_images=list(report.skipped))
    reporter.model = model
    reporter.averaged_weights = (lambda: ema.applied_to(parameters)) if ema else None
    if held_dataset is not None:
        reporter.held_out_loss = held_out_evaluator(config, held_dataset, model, denoiser, accelerator,
                                                    reporter.averaged_weights)

    def after_step(at_step: int, *logged) -> None:
        reporter(at_step, *logged)
        for suffix in saves.get(at_step, []) if accelerator.is_main_process else []:
            # The EMA weights are what the final folder will hold, so they are what each folder holds too.
            with ema.applied_to(parameters) if ema else contextlib.nullcontext():
                result.intermediate_outputs.append(
                    _write_model_folder(config, unet, intermediate_folder(config.output, suffix), model.scheduler_config))

    try:
        if held_dataset is not None and step == 0:
            reporter.record_validation_loss(0)  # the base model's, for comparison
        reporter.before_first_step(step)
        step = run_denoising_loop(
            config, accelerator=accelerator, model=model, denoiser=denoiser, dataset=dataset, optimizer=optimizer,
            lr_schedule=lr_schedule, step=step, stop_at_step=stop_at_step,
            checkpoint_dir=Path(config.checkpoint_dir or f"{config.output}-checkpoints"), fingerprint=fingerprint,
            clipped=lambda: parameters, trainable_state=trainable_state, result=result,
            after_optimizer_step=(lambda: ema.update(parameters)) if ema else None, after_step=after_step)
    finally:
        reporter.close()
    result.steps = step
    result.validation_losses = list(reporter.validation_losses)

    # 5. Save the whole model with the EMA (or raw) UNet weights.
    if step == config.max_steps and accelerator.is_main_process:
        unet.eval()
        if config.gradient_checkpointing:
            unet.disable_gradient_checkpointing()
        if ema:
            ema.copy_to(parameters)
        result.output = _write_model_folder(config, unet, config.output, model.scheduler_config)
    result.seconds = time.time() - started
    logger.info("Fine-tuned %d steps in %.1f s; output %s", step, result.seconds, result.output)
    return result
