"""Run by `accelerate launch --num_processes 2` from test_clip_trainer.py: train, then report as JSON."""

import json
import sys

import torch

from mixkit.training.clip_config import ClipTrainingConfig
from mixkit.training.clip_trainer import train_clip

torch.set_num_threads(1)
model, dataset, output, report = sys.argv[1:5]
result = train_clip(ClipTrainingConfig(model=model, dataset=dataset, output=output, batch_size=2, max_steps=2,
                                       learning_rate=1e-3, seed=5))
if torch.distributed.get_rank() == 0:
    with open(report, "w", encoding="utf-8") as handle:
        json.dump({"losses": result.losses, "world": torch.distributed.get_world_size()}, handle)
