"""Fine-tune a CLIP model on image-text pairs with the symmetric contrastive loss, on accelerate.

With several processes each one encodes its own slice of the global batch and
`clip_contrastive_loss` all-gathers the features, so every image is contrasted with every text of
the global batch, as in the paper; DDP averages the gradients. Batch b of the run is a pure
function of (seed, b), which makes resume exact as in the SD trainer.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

import torch
from torch import nn

from mixkit.data import BucketedImageDataset, scan_jsonl_manifest, scan_kohya_folder
from mixkit.io.atomic import atomic_output_folder, check_new_output_folder
from mixkit.training.accelerator_setup import make_accelerator
from mixkit.training.clip_config import ClipTrainingConfig
from mixkit.training.losses import clip_contrastive_loss
from mixkit.training.plain_step import finish_step
from mixkit.training.training_result import TrainingResult
from mixkit.training.training_state import architecture_fingerprint, load_training_state, restore_rng_states

logger = logging.getLogger(__name__)
# Images are resized by the CLIP processor, so the dataset only provides order; this size is unused.
ORDER_ONLY_RESOLUTION = 64


class ClipDualEncoder(nn.Module):
    """Projected (unnormalised) image and text features of a transformers `CLIPModel`, and its logit scale.

    The scale is returned from forward so DDP sees it used in the graph and averages its gradient too.
    """

    def __init__(self, clip) -> None:
        super().__init__()
        self.clip = clip

    def forward(self, pixel_values, input_ids, attention_mask):
        images = self.clip.visual_projection(self.clip.vision_model(pixel_values=pixel_values).pooler_output)
        text_output = self.clip.text_model(input_ids=input_ids, attention_mask=attention_mask)
        texts = self.clip.text_projection(text_output.pooler_output)
        return images, texts, self.clip.logit_scale


def clip_batch(processor, dataset: BucketedImageDataset, indices: list[int]) -> dict:
    """Processor-ready tensors for the records at `indices`."""
    from mixkit.io.images import load_image

    records = [dataset.records[i] for i in indices]
    images = [load_image(r.path) for r in records]
    encoded = processor(text=[r.caption for r in records], images=images, return_tensors="pt", padding=True, truncation=True)
    return {"pixel_values": encoded["pixel_values"], "input_ids": encoded["input_ids"],
            "attention_mask": encoded["attention_mask"]}


def load_clip(source: str):
    """The CLIP model (float32 master weights) and processor of a folder, a shipped name (mixkit-tiny-clip) or a
    cached hub id. Float32 whatever the file stores: the shipped fp16 weights, trained in fp16 by AdamW, overflowed
    to NaN within two steps; mixed precision comes from autocast, not from the stored dtype."""
    import torch
    from transformers import CLIPModel, CLIPProcessor

    from mixkit.io.sources import resolve_model_source

    path = resolve_model_source(source)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{source!r} is not a CLIP model folder (no config.json); pass a transformers CLIP folder.")
    return CLIPModel.from_pretrained(path, dtype=torch.float32), CLIPProcessor.from_pretrained(path)


def train_clip(config: ClipTrainingConfig, *, stop_at_step: int | None = None) -> TrainingResult:
    """Run (or resume) CLIP contrastive training; saves the model and processor to `config.output` at the end."""

    # 1. Validate and scan the data before loading the model.
    config.check()
    if stop_at_step is not None and not 0 < stop_at_step <= config.max_steps:
        raise ValueError(f"stop_at_step must be in 1..max_steps={config.max_steps}, got {stop_at_step}")
    check_new_output_folder(config.output)
    path = Path(config.dataset)
    report = scan_jsonl_manifest(path) if path.suffix.lower() == ".jsonl" else scan_kohya_folder(
        path, missing_captions=config.missing_captions, caption_extension=config.caption_extension)
    # Repeats are ignored: a repeated pair in the same batch would be its own false negative.
    records = [dataclasses.replace(r, repeats=1) for r in report.records]
    dataset = BucketedImageDataset(records, ORDER_ONLY_RESOLUTION, source=config.dataset)
    accelerator = make_accelerator(mixed_precision=config.mixed_precision)
    world, rank = accelerator.num_processes, accelerator.process_index
    started = time.time()

    # 2. Model, optimizer, fingerprint, optional resume.
    torch.manual_seed(config.seed)
    clip, processor = load_clip(config.model)
    clip.train()
    encoder = ClipDualEncoder(clip)
    optimizer = torch.optim.AdamW(clip.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    fingerprint = architecture_fingerprint(dict(clip.state_dict()), {"trainer": "clip"})
    step = 0
    if config.resume_from:
        state = load_training_state(config.resume_from, fingerprint, config.max_steps)
        clip.load_state_dict(state["trainable"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["scheduler"])
        restore_rng_states(state["rng"])
        step = state["step"]
    encoder, optimizer = accelerator.prepare(encoder, optimizer)

    # 3. Train: process r takes batch step * world + r.
    batches_per_epoch = dataset.batches_per_epoch(config.batch_size)
    checkpoint_dir = Path(config.checkpoint_dir or f"{config.output}-checkpoints")
    result = TrainingResult(output=None, steps=step, first_step=step, skipped_images=list(report.skipped))
    end = stop_at_step or config.max_steps
    epoch_cache: dict[int, list[list[int]]] = {}
    while step < end:
        epoch, position = divmod(step * world + rank, batches_per_epoch)
        if epoch not in epoch_cache:
            epoch_cache = {epoch: dataset.epoch_batches(epoch, config.batch_size, config.seed)}
        batch = clip_batch(processor, dataset, epoch_cache[epoch][position])
        batch = {k: v.to(accelerator.device) for k, v in batch.items()}
        images, texts, log_scale = encoder(**batch)
        loss = clip_contrastive_loss(images, texts, log_scale)
        accelerator.backward(loss)
        step += 1
        finish_step(loss, step, accelerator=accelerator, optimizer=optimizer, schedule=schedule, result=result,
                    config=config, stop_at_step=stop_at_step, checkpoint_dir=checkpoint_dir, fingerprint=fingerprint,
                    trainable=lambda: dict(clip.state_dict()))
    result.steps = step

    # 4. Save the fine-tuned model (safetensors via save_pretrained) with its processor, in one rename.
    if step == config.max_steps and accelerator.is_main_process:
        with atomic_output_folder(config.output) as temp:
            accelerator.unwrap_model(encoder).clip.save_pretrained(temp)
            processor.save_pretrained(temp)
        result.output = Path(config.output)
    result.seconds = time.time() - started
    if accelerator.is_main_process:
        first, last = (result.losses[0], result.losses[-1]) if result.losses else (float("nan"), float("nan"))
        logger.info("CLIP: %d steps in %.1f s, loss %.4f -> %.4f", step, result.seconds, first, last)
    return result
