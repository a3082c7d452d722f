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
from mixkit.training.dataset_scan import scan_dataset, scan_path
from mixkit.training.denoising_loop import ConditionedDenoiser
from mixkit.training.frozen_model_run import (load_frozen_model, optimizer_with_schedule, put_back_on_failure,
                                              resume, start_run, train_attached)
from mixkit.training.kohya_export import cast_for_saving, without_local_paths
from mixkit.training.modelspec import ModelSpecTexts
from mixkit.training.ti_config import SDTextualInversionConfig
from mixkit.training.ti_export import check_embedding_output, embedding_modelspec, save_embedding
from mixkit.training.ti_vectors import TextualInversionVectors, holds_token_string, initial_vectors, vectors_from_file
from mixkit.training.training_result import TrainingResult
from mixkit.training.training_state import architecture_fingerprint
from mixkit.training.validation_loss import held_out_records

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
    dataset = BucketedImageDataset(report.records, config.resolution, config.bucket_settings(), source=config.dataset,
                                   loss_masks=config.masked_loss)
    setup = start_run(config, dataset, held_records, stop_at_step=stop_at_step)
    config = setup.config

    # 2. Load and freeze the whole model; the vectors (from init_word, a weights file or zeros) are all that trains.
    model, owns_model = load_frozen_model(config, model)
    if templates is None and tokenizer is None:  # a hub id: checked with the loaded model's tokenizer
        _check_captions_hold_token(all_records, config, model.tokenizers[0])
    if owns_model and setup.precision in ("bf16", "fp16"):
        # As the LoRA trainer: the frozen UNet in half precision; the text encoders stay float32, since the
        # vectors' gradients pass through them.
        model.unet.to(dtype=torch.bfloat16 if setup.precision == "bf16" else torch.float16)
    is_sdxl = model.family.value == "sdxl"
    n = config.num_vectors_per_token
    initial = (vectors_from_file(config.weights, model.text_encoders, is_sdxl, n) if config.weights
               else initial_vectors(model.text_encoders, model.tokenizers, n, config.init_word))
    vectors = TextualInversionVectors(model.text_encoders, model.tokenizers, token, initial)
    vectors.attach()
    with put_back_on_failure(model, vectors, config):
        if config.gradient_checkpointing:
            model.unet.enable_gradient_checkpointing()
        model.unet.train()
        # The vectors sit at the text encoders' input, so their forward pass needs gradients.
        denoiser = ConditionedDenoiser(model, True, adapters=vectors, encoding=config.caption_encoding())
        # No weight decay: it would pull the word towards the zero vector, not towards where it started (A1111 trains
        # embeddings without it).
        optimizer, lr_schedule = optimizer_with_schedule(
            config, [{"params": list(vectors.parameters()), "lr": config.learning_rate, "weight_decay": 0.0}])
        fingerprint = architecture_fingerprint(
            dict(vectors.state_dict()),
            {"trainer": "textual-inversion", "token_string": token, "family": model.family.value,
             "unet": {k: v for k, v in dict(model.unet.config).items() if not k.startswith("_")}})

        # 3. Resume: vectors, optimizer, schedule, RNGs and step.
        step = resume(config, fingerprint, optimizer, lr_schedule, vectors.load_state_dict)
        denoiser, optimizer = setup.accelerator.prepare(denoiser, optimizer)

    def save(path: str | Path, at_step: int, kind: str) -> Path:
        """The embedding file of the vectors as they are now (an embedding file has no epoch, so `kind` is unused)."""
        metadata = embedding_modelspec(
            family=model.family.value, v_prediction=model.prediction_type == "v_prediction", title=setup.run_name,
            resolution=config.resolution, timestamp=time.time(),
            texts=ModelSpecTexts.of_config(config),
            clip_skip=config.clip_skip, version=f"mixkit/{mixkit.__version__}")
        metadata["mixkit_training_config"] = json.dumps(
            without_local_paths(dataclasses.asdict(config), CONFIG_PATH_KEYS), indent=2, sort_keys=True)
        return save_embedding(cast_for_saving(vectors.file_tensors(), config.save_precision), path, metadata=metadata,
                              name=Path(path).stem, step=step_offset + at_step,
                              checkpoint_name=getattr(model, "name", None) or Path(str(config.model)).name)

    # 4. Train with the shared loop, templates (if any) making each micro-batch's captions; 5. write the embedding
    # (main process only; also when interrupted after some steps, atomically, so an Interrupt never leaves half a
    # file) and detach the vectors, so the caller's model is unchanged.
    result = train_attached(
        setup, model=model, attached=vectors, denoiser=denoiser, optimizer=optimizer, lr_schedule=lr_schedule,
        step=step, stop_at_step=stop_at_step, fingerprint=fingerprint, clipped=lambda: vectors.parameters(),
        trainable_state=vectors.state_dict, save=save, skipped_images=report.skipped,
        rewrite_captions=(lambda captions, index: templates.captions(captions, config.seed, index))
        if templates is not None else None, should_stop=should_stop, on_step=on_step, save_when_interrupted=True)
    step = result.steps
    if setup.accelerator.is_main_process:
        logger.info("Trained %r (%d vectors) to step %d (%d steps in this run) in %.1f s; final loss %.4f; output %s",
                    token, n, step, step - result.first_step, result.seconds,
                    result.losses[-1] if result.losses else float("nan"), result.output)
    return result
