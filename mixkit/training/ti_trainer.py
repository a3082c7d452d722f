"""Train a textual-inversion embedding (a new word's input vectors) on Stable Diffusion 1.x/2.x/SDXL.

The model stays frozen and unchanged: `TextualInversionVectors` puts the trained vectors where the token string
stands in a caption, the shared `run_denoising_loop` trains them (deterministic data order and noise, so resume is
exact), and the result is written as kohya's embedding file (or A1111's `.pt`), which generation uses by its file
name from an embeddings folder. Sample images and the held-out loss see the token string as the vectors too.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Callable

import torch

import mixkit
from mixkit.data import BucketedImageDataset
from mixkit.training.accelerator_setup import make_accelerator, resolve_mixed_precision
from mixkit.training.denoising_loop import ConditionedDenoiser, check_stop_at_step, run_denoising_loop
from mixkit.training.kohya_export import cast_for_saving, without_local_paths
from mixkit.training.modelspec import ModelSpecTexts
from mixkit.training.optimizers import make_optimizer, warmup_schedule
from mixkit.training.run_reporting import StepReporter
from mixkit.training.run_schedule import intermediate_saves, resolve_epochs, validation_points
from mixkit.training.sd_lora_trainer import TrainingResult, intermediate_output, scan_dataset, scan_path
from mixkit.training.ti_config import SDTextualInversionConfig
from mixkit.training.ti_export import check_embedding_output, embedding_modelspec, save_embedding
from mixkit.training.ti_vectors import TextualInversionVectors, holds_token_string, initial_vectors, vectors_from_file
from mixkit.training.training_schedule import with_training_schedule
from mixkit.training.training_state import architecture_fingerprint, resume_run
from mixkit.training.validation_loss import held_out_evaluator, held_out_records

logger = logging.getLogger(__name__)

CONFIG_PATH_KEYS = ("model", "dataset", "output", "weights", "template_file", "validation_dataset", "checkpoint_dir",
                    "resume_from", "logging_dir", "sample_prompts")


def _check_captions_hold_token(records: list, config: SDTextualInversionConfig, tokenizer) -> None:
    """Without templates the captions must write the token string: an image whose caption lacks it gives the vectors
    no gradient, and a run where none has it would train nothing and still write a file. Matched on `tokenizer`'s
    ids (the model's first), as the vectors are put in during training and as generation finds embedding names."""
    token = config.resolved_token_string()
    framed = [" ".join(p for p in (config.caption_prefix, r.caption, config.caption_suffix) if p) for r in records]
    held = holds_token_string(framed, tokenizer, token, config.num_vectors_per_token,
                              config.caption_encoding().max_token_length)
    missing = [r for r, holds in zip(records, held) if not holds]
    if len(missing) == len(records):
        raise ValueError(f"token_string {token!r} is in none of the {len(records)} captions of {config.dataset!r}, so "
                         "the embedding would never train; write it into the captions (or set caption_prefix="
                         f"{token!r}), or train on kohya's templates (use_object_template / use_style_template)")
    if missing:
        logger.warning("%d of %d captions lack token_string %r (e.g. %s); those images do not train the embedding",
                       len(missing), len(records), token, missing[0].path)


def train_textual_inversion(config: SDTextualInversionConfig, *, stop_at_step: int | None = None,
                            model=None, should_stop: Callable[[], bool] | None = None,
                            on_step: Callable[[int, int, float], None] | None = None,
                            step_offset: int = 0) -> TrainingResult:
    """Run (or resume) a textual-inversion training; writes `config.output` unless stopped early by `stop_at_step`.

    `stop_at_step` ends the run after that step with a checkpoint; `model` lets a caller pass an already loaded
    `DiffusionModel` (it comes back bit-identical) instead of loading `config.model`.

    For a server's Train tab: `should_stop()` is asked before every step; once it says True the run ends there and
    writes `config.output` with the vectors reached (A1111's Interrupt keeps the training done so far), or nothing
    when no step ran (`result.interrupted` tells). `on_step(step, max_steps, loss)` reports each finished step.
    `step_offset` is how far the starting vectors (`weights`) were already trained: the files record
    `step_offset + step` as their step, as A1111 counts an embedding's steps across runs.
    """

    # 1. Validate settings and data before loading anything heavy.
    config.check()
    if isinstance(step_offset, bool) or not isinstance(step_offset, int) or step_offset < 0:
        raise ValueError(f"step_offset must be a whole number >= 0 (the steps the starting vectors had), got "
                         f"{step_offset!r}")
    check_embedding_output(config.output)
    if config.weights and not Path(config.weights).expanduser().is_file():
        raise FileNotFoundError(f"weights {config.weights!r} is not a file; name the embedding (.safetensors or .pt) "
                                "to start from")
    templates = config.caption_templates()
    token = config.resolved_token_string()
    if token != Path(config.output).stem:
        logger.warning("token_string %r differs from the output's file name %r: prompts use an embedding by its file "
                       "name, so write %r in them", token, Path(config.output).stem, Path(config.output).stem)
    report = scan_dataset(config)
    all_records = report.records
    # The check needs the model's tokenizer; a local model's is read without the weights, so it still fails early.
    tokenizer = None
    if templates is None:
        from mixkit.models.diffusion.loading import load_first_tokenizer

        tokenizer = model.tokenizers[0] if model is not None else load_first_tokenizer(config.model)
    if tokenizer is not None:
        _check_captions_hold_token(all_records, config, tokenizer)
    report.records, held_records = held_out_records(config, report.records, scan_path)
    buckets = config.bucket_settings()
    dataset = BucketedImageDataset(report.records, config.resolution, buckets, source=config.dataset,
                                   loss_masks=config.masked_loss)
    held_dataset = (BucketedImageDataset(held_records, config.resolution, buckets, source="held-out images",
                                         loss_masks=config.masked_loss) if held_records else None)
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
    started = time.time()

    # 2. Load and freeze the whole model; the vectors (from init_word, a weights file or zeros) are all that trains.
    owns_model = model is None
    if model is None:
        from mixkit.models.diffusion.loading import load_diffusion_model

        model = load_diffusion_model(config.model)
    if templates is None and tokenizer is None:  # a hub id: checked with the loaded model's tokenizer
        _check_captions_hold_token(all_records, config, model.tokenizers[0])
    model = with_training_schedule(model, config.prediction_type, config.zero_terminal_snr)
    config.caption_encoding().check_layers(model.text_encoders)
    for module in [model.unet, model.vae, *model.text_encoders]:
        module.requires_grad_(False)
    if owns_model and precision in ("bf16", "fp16"):
        # As the LoRA trainer: the frozen UNet in half precision; the text encoders stay float32, since the
        # vectors' gradients pass through them.
        model.unet.to(dtype=torch.bfloat16 if precision == "bf16" else torch.float16)
    is_sdxl = model.family.value == "sdxl"
    n = config.num_vectors_per_token
    initial = (vectors_from_file(config.weights, model.text_encoders, is_sdxl, n) if config.weights
               else initial_vectors(model.text_encoders, model.tokenizers, n, config.init_word))
    vectors = TextualInversionVectors(model.text_encoders, model.tokenizers, token, initial)
    vectors.attach()
    if config.gradient_checkpointing:
        model.unet.enable_gradient_checkpointing()
    model.unet.train()
    # The vectors sit at the text encoders' input, so their forward pass needs gradients.
    denoiser = ConditionedDenoiser(model, True, adapters=vectors, encoding=config.caption_encoding())
    # No weight decay: it would pull the word towards the zero vector, not towards where it started (A1111 trains
    # embeddings without it).
    optimizer = make_optimizer(config.optimizer, [{"params": list(vectors.parameters()), "lr": config.learning_rate,
                                                   "weight_decay": 0.0}], config.learning_rate)
    lr_schedule = warmup_schedule(optimizer, config.lr_schedule, config.warmup_steps, config.max_steps,
                                  num_cycles=config.lr_schedule_num_cycles, power=config.lr_schedule_power)
    fingerprint = architecture_fingerprint(
        dict(vectors.state_dict()),
        {"trainer": "textual-inversion", "token_string": token, "family": model.family.value,
         "unet": {k: v for k, v in dict(model.unet.config).items() if not k.startswith("_")}})

    # 3. Resume: vectors, optimizer, schedule, RNGs and step.
    step = 0
    if config.resume_from:
        trainable, step = resume_run(config.resume_from, fingerprint, optimizer=optimizer, lr_schedule=lr_schedule,
                                     max_steps=config.max_steps)
        vectors.load_state_dict(trainable)
    denoiser, optimizer = accelerator.prepare(denoiser, optimizer)

    # 4. Train with the shared loop; templates (if any) make each micro-batch's captions.
    checkpoint_dir = Path(config.checkpoint_dir or Path(config.output).with_suffix("").as_posix() + "-checkpoints")
    result = TrainingResult(output=None, steps=step, first_step=step, skipped_images=list(report.skipped))
    reporter.model = model
    if held_dataset is not None:
        reporter.held_out_loss = held_out_evaluator(config, held_dataset, model, denoiser, accelerator, None)

    def save(path: str | Path, at_step: int) -> Path:
        metadata = embedding_modelspec(
            family=model.family.value, v_prediction=model.prediction_type == "v_prediction", title=run_name,
            resolution=config.resolution, timestamp=time.time(),
            texts=ModelSpecTexts(config.metadata_title, config.metadata_author, config.metadata_description,
                                 config.metadata_license, config.metadata_tags),
            clip_skip=config.clip_skip, version=f"mixkit/{mixkit.__version__}")
        metadata["mixkit_training_config"] = json.dumps(
            without_local_paths(dataclasses.asdict(config), CONFIG_PATH_KEYS), indent=2, sort_keys=True)
        return save_embedding(cast_for_saving(vectors.file_tensors(), config.save_precision), path, metadata=metadata,
                              name=Path(path).stem, step=step_offset + at_step,
                              checkpoint_name=getattr(model, "name", None) or Path(str(config.model)).name)

    saves = intermediate_saves(config, batches_per_epoch, accelerator.num_processes)

    def after_step(at_step: int, *logged) -> None:
        reporter(at_step, *logged)
        if on_step is not None:
            on_step(at_step, config.max_steps, logged[0])
        for suffix in saves.get(at_step, []) if accelerator.is_main_process else []:
            result.intermediate_outputs.append(save(intermediate_output(config.output, suffix), at_step))

    try:
        if held_dataset is not None and step == 0:
            reporter.record_validation_loss(0)
        reporter.before_first_step(step)
        step = run_denoising_loop(
            config, accelerator=accelerator, model=model, denoiser=denoiser, dataset=dataset, optimizer=optimizer,
            lr_schedule=lr_schedule, step=step, stop_at_step=stop_at_step, checkpoint_dir=checkpoint_dir,
            fingerprint=fingerprint, clipped=lambda: vectors.parameters(), trainable_state=vectors.state_dict,
            result=result, after_step=after_step,
            rewrite_captions=(lambda captions, index: templates.captions(captions, config.seed, index))
            if templates is not None else None, should_stop=should_stop)
        result.steps = step
        result.validation_losses = list(reporter.validation_losses)
        result.interrupted = step < (stop_at_step or config.max_steps)

        # 5. Write the embedding (main process only), also when interrupted after some steps (written atomically, so
        # an Interrupt never leaves half a file); detach so the caller's model is unchanged.
        trained = step == config.max_steps or (result.interrupted and step > result.first_step)
        if trained and accelerator.is_main_process:
            result.output = save(config.output, step)
    finally:
        reporter.close()
        vectors.detach()
        model.unet.eval()
        if config.gradient_checkpointing:
            model.unet.disable_gradient_checkpointing()
    result.seconds = time.time() - started
    if accelerator.is_main_process:
        logger.info("Trained %r (%d vectors) to step %d (%d steps in this run) in %.1f s; final loss %.4f; output %s",
                    token, n, step, step - result.first_step, result.seconds,
                    result.losses[-1] if result.losses else float("nan"), result.output)
    return result
