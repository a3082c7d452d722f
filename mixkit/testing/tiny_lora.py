"""A kohya-format LoRA written by hand for a given UNet: the test fixture several suites share."""

from __future__ import annotations

from pathlib import Path

import torch


def write_attention_lora(unet: torch.nn.Module, path: str | Path, projections=("to_q", "to_k", "to_v"),
                         scale: float = 1.0, rank: int = 2, seed: int = 0) -> Path:
    """Random rank-`rank` LoRA (alpha = rank) on every attention projection named in `projections`.

    `scale` multiplies both factors: 1.0 changes a random tiny model a lot, 0.2 keeps it well
    conditioned enough to compare two precisions.
    """
    from safetensors.torch import save_file

    generator, tensors = torch.Generator().manual_seed(seed), {}
    for name, module in unet.named_modules():
        if isinstance(module, torch.nn.Linear) and name.endswith(tuple(projections)):
            key = "lora_unet_" + name.replace(".", "_")
            tensors[f"{key}.lora_down.weight"] = scale * torch.randn(rank, module.in_features, generator=generator)
            tensors[f"{key}.lora_up.weight"] = scale * torch.randn(module.out_features, rank, generator=generator)
            tensors[f"{key}.alpha"] = torch.tensor(float(rank))
    save_file(tensors, str(path))
    return Path(path)
