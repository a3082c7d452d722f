"""Train a LoRA / LoCon on Stable Diffusion 1.x/2.x/SDXL with accelerate, and export it in kohya format.

Adapters are attached to the frozen model with hooks (`LoraNetwork`), trained by the shared
`run_denoising_loop` (deterministic data order and noise, so resume is exact), and written as the
kohya `.safetensors` people share (SDXL in kohya's SGM key layout by default); the caller's model
is left as it was. Optional validation images and TensorBoard logs come from `run_reporting`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import random
import time
from pathlib import Path

import torch

import mixkit
from mixkit.data import BucketedImageDataset
from mixkit.data.bucketing import resolution_size
from mixkit.data.class_balance import balance_class_images
from mixkit.training.dataset_config import is_dataset_config
from mixkit.training.dataset_config_scan import (RUN_WIDE_DATASET_KEYS, dataset_group, datasets_metadata,
                                                  scan_dataset_config, without_held_out)
from mixkit.training.dataset_scan import check_masks, scan_dataset, scan_path
from mixkit.training.denoising_loop import ConditionedDenoiser
from mixkit.training.ema import EmaWeights
from mixkit.training.frozen_model_run import (load_frozen_model, optimizer_with_schedule, put_back_on_failure,
                                              resume, start_run, train_attached)
from mixkit.training.kohya_export import (base_model_file_metadata, cast_for_saving, kohya_rate_settings,
                                          minimum_metadata,
                                          save_kohya_lora, to_sgm_layout, training_metadata, without_local_paths)
from mixkit.training.lora_network import CROSS_ATTENTION_KV, LoraNetwork
from mixkit.training.lycoris_presets import LYCORIS_PRESETS
from mixkit.training.modelspec import ModelSpecTexts, lora_modelspec
from mixkit.training.network_weights import load_network_weights
from mixkit.training.optimizers import optimizer_description
from mixkit.training.output_path import check_output_path
from mixkit.training.pissa import file_ranks
from mixkit.training.run_schedule import epoch_of_save
from mixkit.training.sd_lora_config import LORAPLUS_RATIOS, SDLoraTrainingConfig
from mixkit.training.training_result import TrainingResult
from mixkit.training.training_state import architecture_fingerprint
from mixkit.training.validation_loss import held_out_records
from mixkit.training.word_vectors import TrainedWordVectors

logger = logging.getLogger(__name__)

# Settings that name files or folders: the file's `mixkit_training_config` records only their last part.
CONFIG_PATH_KEYS = ("model", "dataset", "output", "class_dataset", "network_weights", "validation_dataset",
                    "checkpoint_dir", "resume_from", "logging_dir", "sample_prompts")


def _frozen_weights_in_half_precision(model, precision: str, train_text_encoder: bool) -> None:
    """Store the frozen UNet (and text encoders unless they get adapters) in bf16/fp16, as diffusers'
    LoRA script does, so autocast does not re-cast every weight at every step; on CPU also channels-last
    (oneDNN's fast convolution layout). Adapters stay fp32. Only for a model this run loaded itself:
    a caller's model must come back unchanged, and a round trip through bf16 would not."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    model.unet.to(dtype=dtype)
    if model.unet.device.type == "cpu":
        model.unet.to(memory_format=torch.channels_last)
    if not train_text_encoder:
        for encoder in model.text_encoders:
            encoder.to(dtype=dtype)


def _base_model_prediction(denoiser, network: LoraNetwork, accelerator):
    """prior_target="base_model": the prior loss's target is what the model predicts without the adapters."""
    plain = accelerator.unwrap_model(denoiser)

    def predict(*inputs):
        with network.disabled(), accelerator.autocast():
            return plain(*inputs)

    return predict


def _settings(config: SDLoraTrainingConfig) -> dict:
    """The run's settings as kohya's `ss_*` keys (without the prefix) and values."""
    keys = ("max_steps", "batch_size", "gradient_accumulation_steps",
            "resolution", "seed", "noise_offset", "min_snr_gamma", "mixed_precision", "gradient_checkpointing", "bucketing",
            "prior_loss_weight", "prior_target", "lr_schedule", "warmup_steps", "cache_latents", "use_ema",
            "min_timestep", "max_timestep", "timestep_sampling", "loraplus_lr_ratio", "loraplus_unet_lr_ratio",
            "loraplus_text_encoder_lr_ratio", "masked_loss",
            "shuffle_caption", "keep_tokens", "caption_tag_dropout_rate", "caption_dropout_rate", "loss_type",
            "ip_noise_gamma", "max_grad_norm", "flip_aug", "multires_noise_iterations", "multires_noise_discount",
            "debiased_estimation_loss", "max_train_epochs", "network_dropout", "scale_weight_norms",
            "zero_terminal_snr", "clip_skip", "max_token_length", "training_comment", "min_bucket_reso",
            "max_bucket_reso", "bucket_no_upscale", "noise_offset_random_strength", "adaptive_noise_scale",
            "ip_noise_gamma_random_strength")
    renamed = {"max_steps": "max_train_steps", "batch_size": "batch_size_per_device", "bucketing": "enable_bucket",
               "lr_schedule": "lr_scheduler", "warmup_steps": "lr_warmup_steps",
               "debiased_estimation_loss": "debiased_estimation"}
    settings = {renamed.get(k, k): getattr(config, k) for k in keys}
    settings.update(kohya_rate_settings(learning_rate=config.learning_rate, unet_lr=config.unet_learning_rate,
                                        text_encoder_lr=config.text_encoder_learning_rate,
                                        relative_step_adafactor=config.relative_step_adafactor()))
    # kohya's args.resolution after its prepare_dataset_args: a (width, height) tuple, "(512, 512)" in the file
    settings["resolution"] = str(resolution_size(config.resolution))
    settings["color_aug"] = settings["random_crop"] = False  # mixkit has no colour augmentation, crops centred
    settings["cache_latents"] = config.cache_latents or config.cache_latents_to_disk
    if config.use_ema:
        settings["ema_decay"] = config.ema_decay
    if config.loss_type != "l2":
        settings["huber_c"] = config.huber_c
        settings["huber_schedule"] = config.huber_schedule
    if config.masked_loss:
        settings["masked_loss_unmasked_weight"] = config.masked_loss_unmasked_weight
        settings["masked_loss_normalize"] = config.masked_loss_normalize
    return settings


def train_sd_lora(config: SDLoraTrainingConfig, *, stop_at_step: int | None = None, model=None) -> TrainingResult:
    """Run (or resume) a LoRA training; writes `config.output` unless stopped early by `stop_at_step`.

    `stop_at_step` ends the run after that step with a checkpoint (for time-sliced jobs); `model`
    lets a caller pass an already loaded `DiffusionModel` instead of loading `config.model`.
    """

    # 1. Validate settings and data before loading anything heavy.
    config.check()
    check_output_path(config.output)
    if config.network_weights and not Path(config.network_weights).expanduser().is_file():
        raise FileNotFoundError(f"network_weights {config.network_weights!r} is not a file; name the kohya LoRA "
                                "(.safetensors) to start from")
    buckets = config.bucket_settings()
    members = None  # a kohya dataset config's datasets, each with its records
    if is_dataset_config(config.dataset):
        report, members = scan_dataset_config(config)
        check_masks(config, report)
        if config.prior_target != "noise" and not any(r.prior for r in report.records):
            raise ValueError(f"prior_target={config.prior_target!r} acts on class images, but {config.dataset} has no "
                             "subset with is_reg = true; add the class images as one, or leave prior_target='noise'")
        report.records, held_records = held_out_records(config, report.records, scan_path)
        members = without_held_out(members, report.records)
        dataset = dataset_group(members, config.dataset, config.masked_loss, config.balance_class_images)
    else:
        report = scan_dataset(config)
        report.records, held_records = held_out_records(config, report.records, scan_path)
        records = balance_class_images(report.records) if config.balance_class_images else report.records
        dataset = BucketedImageDataset(records, config.resolution, buckets,
                                       source=config.dataset, loss_masks=config.masked_loss)
    setup = start_run(config, dataset, held_records, stop_at_step=stop_at_step)
    config, accelerator, precision = setup.config, setup.accelerator, setup.precision

    # 2. Load and freeze the base model; attach adapters initialised from the seed.
    model, owns_model = load_frozen_model(config, model)
    if owns_model and precision in ("bf16", "fp16"):
        _frozen_weights_in_half_precision(model, precision, config.train_text_encoder)
    torch.manual_seed(config.seed)
    conv_rank, conv_alpha = config.conv_layers()
    words = (TrainedWordVectors(model.text_encoders, model.tokenizers, config.train_word_vectors)
             if config.train_word_vectors else None)
    network = LoraNetwork(model.unet, model.text_encoders, rank=config.rank, alpha=config.alpha, conv_rank=conv_rank,
                          conv_alpha=conv_alpha, train_text_encoder=config.train_text_encoder,
                          train_unet=config.train_unet,
                          unet_layers=CROSS_ATTENTION_KV if config.network == "cross-kv" else None,
                          word_vectors=words, dropout=config.network_dropout, rank_dropout=config.rank_dropout,
                          module_dropout=config.module_dropout, dora=config.dora_wd,
                          preset=LYCORIS_PRESETS.get(config.lycoris_preset) if config.lycoris_preset else None,
                          # kohya's SDXL UNet has no layer at a preset's SD 1.x paths (`lycoris_presets`)
                          top_level_paths=model.family.value != "sdxl", initialisation=config.init_lora_weights)
    if config.network_weights:  # before the hooks go on: a refused file leaves the model as it was
        load_network_weights(network, config.network_weights, unet=model.unet, sdxl=model.family.value == "sdxl")
    network.attach()
    with put_back_on_failure(model, network, config):
        if config.gradient_checkpointing:
            model.unet.enable_gradient_checkpointing()
        model.unet.train()
        network.train()  # kohya's dropouts act in training mode; validation switches it to eval (`eval_mode`)
        # Word vectors sit at the text encoder's input, so its forward pass needs gradients for them too.
        denoiser = ConditionedDenoiser(model, config.train_text_encoder or words is not None, adapters=network,
                                       encoding=config.caption_encoding())
        unet_lr, te_lr = config.part_learning_rates()
        unet_ratio, text_encoder_ratio = config.loraplus_ratios()
        optimizer, lr_schedule = optimizer_with_schedule(
            config, network.parameter_groups(unet_lr, te_lr, config.word_vectors_learning_rate,
                                             unet_up_lr_ratio=unet_ratio, text_encoder_up_lr_ratio=text_encoder_ratio))
        optimizer_name = optimizer_description(optimizer)
        trained = list(network.parameters())
        ema = EmaWeights(trained, config.ema_decay) if config.use_ema else None
        fingerprint = architecture_fingerprint(
            network.kohya_state_dict(),
            {"unet": {k: v for k, v in dict(model.unet.config).items() if not k.startswith("_")},
             "family": model.family.value,
             **({"word_vectors": list(config.train_word_vectors)} if words is not None else {}),
             **({"ema": True} if ema is not None else {})},
        )

        def trainable_state() -> dict:
            return {**network.state_dict(), **(ema.state_dict() if ema is not None else {})}

        def load_trainable(trainable: dict) -> None:
            network.load_state_dict({k: v for k, v in trainable.items() if not k.startswith("ema.")})
            if ema is not None:
                ema.load_state_dict(trainable)

        # 3. Resume: weights, optimizer, schedule, RNGs and step.
        step = resume(config, fingerprint, optimizer, lr_schedule, load_trainable)
        denoiser, optimizer = accelerator.prepare(denoiser, optimizer)

    # 4. Train (the run is shared with the other SD trainers); the EMA follows every optimizer step.
    batches_per_epoch = setup.batches_per_epoch
    accum, world = config.gradient_accumulation_steps, accelerator.num_processes
    # once: the SHA-256 of a multi-GB checkpoint takes seconds (and is cached on disk by path, size and mtime)
    base_model_file = base_model_file_metadata(config.model)

    def save_lora(path: str | Path, at_step: int, kind: str) -> Path:
        """The kohya file of the adapters (their moving average with EMA) and trained word vectors as they are now;
        `kind` ("step", "epoch" or "final") decides its `ss_epoch` as kohya's (`run_schedule.epoch_of_save`)."""
        metadata = training_metadata(
            **file_ranks(config.rank, config.alpha, conv_rank, conv_alpha, pissa=network.pissa),
            network=config.network, lycoris_preset=config.lycoris_preset,
            family=model.family.value, train_text_encoder=config.train_text_encoder,
            tag_frequency=report.tag_frequency(), dataset_dirs=report.dataset_dirs(),
            # kohya's counts: training samples per epoch (repeats included, class images not), class images with
            # their folders' repeats before balancing
            num_images=sum(r.repeats for r in report.records if not r.prior),
            reg_dataset_dirs=report.dataset_dirs(prior=True),
            settings={**_settings(config), "steps": at_step, "mixed_precision": precision,  # what ran, not "auto"
                      "epoch": epoch_of_save(at_step, kind, config.max_steps, batches_per_epoch, accum, world),
                      "num_epochs": epoch_of_save(config.max_steps, "final", config.max_steps, batches_per_epoch,
                                                  accum, world),
                      "num_batches_per_epoch": math.ceil(batches_per_epoch / world),  # each process's, as kohya
                      "total_batch_size": config.batch_size * accum * world,
                      "optimizer": optimizer_name, "session_id": session_id,
                      "bucket_info": json.dumps(dataset.bucket_info()),
                      "output_name": setup.run_name,
                      "v_parameterization": model.prediction_type == "v_prediction"},
            started_at=setup.started, base_model_name=getattr(model, "name", str(config.model)), dora_wd=config.dora_wd,
            # kohya's ss_network_args holds its --network_args entries, LoRA+ ratios included
            extra_network_args={k: getattr(config, k) for k in ("rank_dropout", "module_dropout", *LORAPLUS_RATIOS)
                                if getattr(config, k)})
        metadata.update(base_model_file)
        if members is not None:  # kohya writes ss_datasets for a run from a dataset config, not the run-wide keys
            metadata = {k: v for k, v in metadata.items() if k not in RUN_WIDE_DATASET_KEYS}
            metadata["ss_datasets"] = json.dumps(datasets_metadata(members, dataset))
        metadata["mixkit_training_config"] = json.dumps(
            without_local_paths(dataclasses.asdict(config), CONFIG_PATH_KEYS), indent=2, sort_keys=True)
        # SAI's model spec: base architecture, title, resolution, date, and what the LoRA was trained to predict, so a
        # loader can warn of a mismatched base.
        metadata.update(lora_modelspec(
            family=model.family.value, v_prediction=model.prediction_type == "v_prediction",
            title=setup.run_name, resolution=config.resolution, timestamp=time.time(),
            texts=ModelSpecTexts.of_config(config),
            min_timestep=config.min_timestep, max_timestep=config.max_timestep, clip_skip=config.clip_skip,
            sgm_names=config.sdxl_key_layout == "sgm", version=f"mixkit/{mixkit.__version__}"))
        if config.no_metadata:
            metadata = minimum_metadata(metadata)
        with ema.applied_to(trained) if ema is not None else contextlib.nullcontext():
            tensors = network.kohya_state_dict()
            if model.family.value == "sdxl" and config.sdxl_key_layout == "sgm":
                tensors = to_sgm_layout(tensors, model.unet)
            if words is not None:
                tensors.update(words.bundled_tensors())
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return save_kohya_lora(cast_for_saving(tensors, config.save_precision), path, metadata)

    # kohya's ss_session_id: one random number per run, shared by its intermediate and final files. Drawn from the
    # system's entropy, not the seeded generators, so it changes no training draw.
    session_id = random.SystemRandom().randint(0, 2**32)

    def after_optimizer_step() -> None:
        if config.scale_weight_norms:  # before the EMA sees the step's weights
            network.apply_max_norm(config.scale_weight_norms)
        if ema is not None:
            ema.update(trained)

    # 5. Export the kohya file (main process only, in `train_attached`), which then detaches the adapters so the
    # caller's model is unchanged.
    averaged_weights = (lambda: ema.applied_to(trained)) if ema is not None else None
    result = train_attached(
        setup, model=model, attached=network, denoiser=denoiser, optimizer=optimizer, lr_schedule=lr_schedule,
        step=step, stop_at_step=stop_at_step, fingerprint=fingerprint, clipped=lambda: network.parameters(),
        trainable_state=trainable_state, save=save_lora, skipped_images=report.skipped,
        averaged_weights=averaged_weights, eval_modules=(network,), after_optimizer_step=after_optimizer_step,
        prior_reference=(_base_model_prediction(denoiser, network, accelerator)
                         if config.prior_target == "base_model" else None))
    step = result.steps
    if accelerator.is_main_process:
        logger.info("Trained to step %d (%d steps in this run) in %.1f s; final loss %.4f; skipped %d unreadable "
                    "images; output %s", step, step - result.first_step, result.seconds,
                    result.losses[-1] if result.losses else float("nan"), len(report.skipped), result.output)
    return result
