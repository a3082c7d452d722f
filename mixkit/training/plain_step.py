"""The end of one optimizer step of the plain (non-diffusion) trainers: CLIP, BLIP-2 stage 1, the VLM LM stages.

After `accelerator.backward(loss)` each of them steps the optimizer and the schedule, records the loss averaged over
processes, stops on a non-finite loss, and writes a resume state when one is due; one function keeps those rules
the same for all of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch

from mixkit.training.training_state import check_finite_loss, checkpoint_path, save_training_state


def finish_step(loss: torch.Tensor, step: int, *, accelerator, optimizer, schedule, result, config,
                stop_at_step: int | None, checkpoint_dir: str | Path, fingerprint: str,
                trainable: Callable[[], dict]) -> None:
    """Complete optimizer step number `step` (1-based, counted already) whose gradients are in place.

    A resume state is written every `config.checkpoint_every` steps and at `stop_at_step`, by the main process;
    `trainable()` gives the tensors it holds (called only then)."""
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    schedule.step()
    result.losses.append(accelerator.reduce(loss.detach(), "mean").item())
    check_finite_loss(result.losses[-1], step, last_checkpoint=result.last_checkpoint or config.resume_from,
                      checkpoint_every=config.checkpoint_every)
    if ((config.checkpoint_every and step % config.checkpoint_every == 0) or step == stop_at_step) \
            and accelerator.is_main_process:
        result.last_checkpoint = save_training_state(
            checkpoint_path(checkpoint_dir, step), step=step, fingerprint=fingerprint, trainable=trainable(),
            optimizer=optimizer.optimizer, scheduler=schedule, config_json=config.to_json())
    accelerator.wait_for_everyone()
