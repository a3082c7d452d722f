"""BLIP-2 stage 1 (Li et al. 2023): train the Q-Former and its heads on image-text pairs, vision frozen.

A Python-API trainer over mixkit's modular parts (`QFormerBridge`, `Blip2Stage1Heads`) and the pure
ITC/ITM/ITG losses: the caller supplies the frozen vision encoder and a `tokenize` function for the
Q-Former's text vocabulary (BLIP-2 uses BERT's), so no tokenizer or checkpoint layout is imposed.
Data order and hard-negative sampling are functions of (seed, step), as in the other trainers.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from mixkit.data import BucketedImageDataset
from mixkit.training.accelerator_setup import make_accelerator
from mixkit.training.sd_lora_trainer import TrainingResult, scan_dataset

# CLIP's normalisation, which BLIP-2's EVA-CLIP image encoder also uses.
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
ORDER_ONLY_RESOLUTION = 64  # the dataset only provides the order; images are resized to image_size here


@dataclass
class Blip2Stage1Config:
    dataset: str
    image_size: int = 224
    batch_size: int = 8
    max_steps: int = 100
    learning_rate: float = 1e-4
    weight_decay: float = 0.05
    seed: int = 0
    missing_captions: str = "folder_name"
    mixed_precision: str = "no"

    def check(self) -> None:
        for name in ("image_size", "batch_size", "max_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.batch_size < 2:
            raise ValueError(f"batch_size must be >= 2: ITC and ITM need in-batch negatives, got {self.batch_size}")
        for name in ("learning_rate", "weight_decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.learning_rate == 0:
            raise ValueError("learning_rate must be > 0, got 0")


class Stage1Model(nn.Module):
    """Frozen vision encoder + trainable bridge and heads; forward returns the summed stage-1 loss."""

    def __init__(self, vision_encoder: nn.Module, bridge: nn.Module, heads: nn.Module) -> None:
        super().__init__()
        self.vision_encoder = vision_encoder.requires_grad_(False).eval()
        self.bridge = bridge
        self.heads = heads

    def forward(self, pixel_values, text_ids, text_mask, generator=None):
        from mixkit.models.vlm.modular.stage1 import blip2_stage1_losses

        return blip2_stage1_losses(self.vision_encoder, self.bridge, self.heads, pixel_values, text_ids, text_mask,
                                   generator=generator)


def image_batch(paths: list[Path], size: int) -> torch.Tensor:
    """Images resized to size x size (bicubic), normalised with CLIP's mean and std."""
    import numpy as np
    from PIL import Image

    from mixkit.io.images import load_image

    mean, std = np.array(CLIP_MEAN, dtype=np.float32), np.array(CLIP_STD, dtype=np.float32)
    arrays = []
    for path in paths:
        pixels = np.asarray(load_image(path).resize((size, size), Image.Resampling.BICUBIC), dtype=np.float32)
        arrays.append((pixels / 255 - mean) / std)
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()


def train_blip2_stage1(config: Blip2Stage1Config, *, vision_encoder: nn.Module, bridge: nn.Module, heads: nn.Module,
                       tokenize: Callable[[list[str]], tuple[torch.Tensor, torch.Tensor]]) -> TrainingResult:
    """Train `bridge` and `heads` in place for `config.max_steps`; returns losses (the caller saves the parts)."""
    config.check()
    report = scan_dataset(config)
    records = [dataclasses.replace(r, repeats=1) for r in report.records]  # a repeated pair is a false negative
    dataset = BucketedImageDataset(records, ORDER_ONLY_RESOLUTION, source=config.dataset)
    accelerator = make_accelerator(mixed_precision=config.mixed_precision)
    world, rank = accelerator.num_processes, accelerator.process_index
    started = time.time()
    torch.manual_seed(config.seed)
    model = Stage1Model(vision_encoder, bridge, heads)
    bridge.train()
    heads.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=config.learning_rate, weight_decay=config.weight_decay)
    model, optimizer = accelerator.prepare(model, optimizer)
    result = TrainingResult(output=None, steps=0, skipped_images=list(report.skipped))
    batches_per_epoch = dataset.batches_per_epoch(config.batch_size)
    for step in range(config.max_steps):
        epoch, position = divmod(step * world + rank, batches_per_epoch)
        indices = dataset.epoch_batches(epoch, config.batch_size, config.seed)[position]
        pixels = image_batch([dataset.records[i].path for i in indices], config.image_size).to(accelerator.device)
        text_ids, text_mask = tokenize([dataset.records[i].caption for i in indices])
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step * world + rank)
        losses = model(pixels, text_ids.to(accelerator.device), text_mask.to(accelerator.device), generator)
        accelerator.backward(losses.total)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        result.losses.append(accelerator.reduce(losses.total.detach(), "mean").item())
    result.steps = config.max_steps
    bridge.eval()
    heads.eval()
    result.seconds = time.time() - started
    return result
