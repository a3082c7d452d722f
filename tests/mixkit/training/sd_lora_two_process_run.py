"""Run by `accelerate launch --num_processes 2` from test_sd_lora_trainer.py."""

import sys

import torch

from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora

torch.set_num_threads(1)
model, dataset, output = sys.argv[1:4]
train_sd_lora(SDLoraTrainingConfig(model=model, dataset=dataset, output=output, resolution=32, batch_size=1,
                                   max_steps=2, learning_rate=1e-2, rank=4, alpha=4.0, seed=3))
