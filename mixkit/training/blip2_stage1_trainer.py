"""BLIP-2 stage 1 (Li et al. 2023): train the Q-Former and its heads on image-text pairs, vision frozen.

Two entry points over mixkit's modular parts (`QFormerBridge`, `Blip2Stage1Heads`) and the pure
ITC/ITM/ITG losses: `train_blip2_stage1` takes the frozen vision encoder, the parts and a
`tokenize` function (no tokenizer or checkpoint layout imposed), and `run_blip2_stage1`, behind
`mixkit train blip2-stage1`, builds them from the config's folders and writes the output folder.
Data order and hard-negative sampling are functions of (seed, step), so a resumed run (weights,
optimizer and RNGs from an atomic checkpoint) reproduces an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Callable

import torch
from torch import nn

from mixkit.data import BucketedImageDataset
from mixkit.training.accelerator_setup import make_accelerator
from mixkit.training.blip2_stage1_config import Blip2Stage1Config
from mixkit.training.dataset_scan import scan_dataset
from mixkit.training.plain_step import finish_step
from mixkit.training.training_result import TrainingResult
from mixkit.training.training_state import architecture_fingerprint, load_training_state, restore_rng_states
from mixkit.training.vlm_lm_training import decay_groups
from mixkit.training.vlm_samples import CLIP_MEAN, CLIP_STD, image_batch

__all__ = ["CLIP_MEAN", "CLIP_STD", "Blip2Stage1Config", "Stage1Model", "image_batch", "run_blip2_stage1",
           "train_blip2_stage1"]

logger = logging.getLogger(__name__)
ORDER_ONLY_RESOLUTION = 64  # the dataset only provides the order; images are resized to image_size here


class Stage1Model(nn.Module):
    """Frozen vision encoder + trainable bridge and heads; forward returns the stage-1 losses."""

    def __init__(self, vision_encoder: nn.Module, bridge: nn.Module, heads: nn.Module) -> None:
        super().__init__()
        self.vision_encoder = vision_encoder.requires_grad_(False).eval()
        self.bridge = bridge
        self.heads = heads

    def forward(self, pixel_values, text_ids, text_mask, generator=None):
        from mixkit.models.vlm.modular.stage1 import blip2_stage1_losses

        return blip2_stage1_losses(self.vision_encoder, self.bridge, self.heads, pixel_values, text_ids, text_mask,
                                   generator=generator)


def _trainable_state(bridge: nn.Module, heads: nn.Module) -> dict[str, torch.Tensor]:
    return {**{f"bridge.{k}": v for k, v in bridge.state_dict().items()},
            **{f"heads.{k}": v for k, v in heads.state_dict().items()}}


def train_blip2_stage1(config: Blip2Stage1Config, *, vision_encoder: nn.Module, bridge: nn.Module, heads: nn.Module,
                       tokenize: Callable[[list[str]], tuple[torch.Tensor, torch.Tensor]],
                       stop_at_step: int | None = None) -> TrainingResult:
    """Train `bridge` and `heads` in place (resuming from `config.resume_from` if set); the caller saves them."""

    # 1. Validate and scan the data.
    config.check()
    if stop_at_step is not None and not 0 < stop_at_step <= config.max_steps:
        raise ValueError(f"stop_at_step must be in 1..max_steps={config.max_steps}, got {stop_at_step}")
    checkpoint_dir = config.checkpoint_dir or (f"{config.output}-checkpoints" if config.output else None)
    if (config.checkpoint_every or stop_at_step) and checkpoint_dir is None:
        raise ValueError("checkpoints need a folder: set checkpoint_dir (or output, whose '-checkpoints' folder is used)")
    from mixkit.training.vlm_parts import vision_image_size

    image_size = config.image_size or vision_image_size(vision_encoder)
    report = scan_dataset(config)
    records = [dataclasses.replace(r, repeats=1) for r in report.records]  # a repeated pair is a false negative
    dataset = BucketedImageDataset(records, ORDER_ONLY_RESOLUTION, source=config.dataset)
    accelerator = make_accelerator(mixed_precision=config.mixed_precision)
    world, rank = accelerator.num_processes, accelerator.process_index
    started = time.time()

    # 2. Model, optimizer, fingerprint, optional resume.
    torch.manual_seed(config.seed)
    model = Stage1Model(vision_encoder, bridge, heads)
    bridge.requires_grad_(True).train()
    heads.requires_grad_(True).train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(decay_groups(trainable, config.weight_decay), lr=config.learning_rate)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    fingerprint = architecture_fingerprint(_trainable_state(bridge, heads), {"trainer": "blip2-stage1"})
    step = 0
    if config.resume_from:
        state = load_training_state(config.resume_from, fingerprint, config.max_steps)
        model.load_state_dict(state["trainable"], strict=False)
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["scheduler"])
        restore_rng_states(state["rng"])
        step = state["step"]
    model, optimizer = accelerator.prepare(model, optimizer)

    # 3. Train: process r takes batch step * world + r; hard negatives drawn from a (seed, batch) generator.
    result = TrainingResult(output=None, steps=step, first_step=step, skipped_images=list(report.skipped))
    batches_per_epoch = dataset.batches_per_epoch(config.batch_size)
    end = stop_at_step or config.max_steps
    while step < end:
        epoch, position = divmod(step * world + rank, batches_per_epoch)
        indices = dataset.epoch_batches(epoch, config.batch_size, config.seed)[position]
        pixels = image_batch([dataset.records[i].path for i in indices], image_size).to(accelerator.device)
        text_ids, text_mask = tokenize([dataset.records[i].caption for i in indices])
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step * world + rank)
        with accelerator.autocast():
            losses = model(pixels, text_ids.to(accelerator.device), text_mask.to(accelerator.device), generator)
        accelerator.backward(losses.total)
        step += 1
        finish_step(losses.total, step, accelerator=accelerator, optimizer=optimizer, schedule=schedule,
                    result=result, config=config, stop_at_step=stop_at_step, checkpoint_dir=checkpoint_dir,
                    fingerprint=fingerprint, trainable=lambda: _trainable_state(bridge, heads))
    result.steps = step
    bridge.eval()
    heads.eval()
    result.seconds = time.time() - started
    return result


def build_stage1_parts(config: Blip2Stage1Config, vision_encoder: nn.Module, vocab_size: int):
    """A fresh text-enabled Q-Former bridge and stage-1 heads sized from the config, vision encoder and vocabulary."""
    from mixkit.models.vlm.modular import QFormerBridge, QFormerBridgeConfig, QFormerConfig
    from mixkit.models.vlm.modular.stage1 import Blip2Stage1Heads

    torch.manual_seed(config.seed)
    qformer = QFormerConfig(**{**config.qformer, "encoder_hidden_size": vision_encoder.config.hidden_size,
                               "text_vocab_size": vocab_size})
    if config.max_text_length > qformer.max_position_embeddings:
        raise ValueError(f"max_text_length {config.max_text_length} exceeds the Q-Former's max_position_embeddings "
                         f"{qformer.max_position_embeddings}; lower it or raise qformer.max_position_embeddings.")
    bridge = QFormerBridge(QFormerBridgeConfig(qformer=qformer, output_size=qformer.hidden_size))
    return bridge, Blip2Stage1Heads(qformer.hidden_size, vocab_size, embed_dim=config.embed_dim)


def run_blip2_stage1(config: Blip2Stage1Config, *, stop_at_step: int | None = None) -> TrainingResult:
    """`mixkit train blip2-stage1`: load the parts named by the config, train, write `config.output`."""
    from mixkit.training.blip2_stage1_output import save_blip2_stage1
    from mixkit.io.atomic import check_new_output_folder
    from mixkit.io.sources import with_shipped_folders
    from mixkit.training.vlm_parts import load_tokenizer, load_vision_encoder, tokenizer_folder

    config.check()
    config = with_shipped_folders(config, ("vision_model",))
    config.check_paths()
    check_new_output_folder(config.output)
    vision_encoder = load_vision_encoder(config.vision_model)
    tokenizer = load_tokenizer(tokenizer_folder(config.tokenizer, None))
    if tokenizer.pad_token_id is None:
        raise ValueError(f"tokenizer {config.tokenizer!r} has no padding token; use one that defines pad_token "
                         "(BERT's, as BLIP-2 uses, does).")
    bridge, heads = build_stage1_parts(config, vision_encoder, len(tokenizer))

    def tokenize(captions: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        encoded = tokenizer(captions, padding=True, truncation=True, max_length=config.max_text_length,
                            return_tensors="pt")
        return encoded["input_ids"], encoded["attention_mask"]

    result = train_blip2_stage1(config, vision_encoder=vision_encoder, bridge=bridge, heads=heads, tokenize=tokenize,
                                stop_at_step=stop_at_step)
    accelerator_main = not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0
    if result.steps == config.max_steps and accelerator_main:
        result.output = save_blip2_stage1(config.output, bridge, heads, tokenizer, config.to_json())
    logger.info("BLIP-2 stage 1: %d steps in %.1f s; output %s", result.steps, result.seconds, result.output)
    return result
