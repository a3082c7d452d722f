"""How long a step-counted run is and when it writes results: epochs, `max_train_epochs`, intermediate saves.

The trainers count optimizer steps (resume, schedules and checkpoints are all step-based); kohya's users
think in epochs (`max_train_epochs`, `save_every_n_epochs`). An epoch is one pass over the dataset's
batches (repeats included); optimizer step s consumes micro-batches [s·A·W, (s+1)·A·W) with A accumulation
steps and W processes, so epoch e is complete after step ceil(e · batches / (A · W)).
"""

from __future__ import annotations

import math


def epoch_end_step(epoch: int, batches_per_epoch: int, accumulation: int, processes: int) -> int:
    """The optimizer step after which epoch `epoch` (1-based) has been seen whole."""
    return math.ceil(epoch * batches_per_epoch / (accumulation * processes))


def epochs_ending_by_step(max_steps: int, batches_per_epoch: int, accumulation: int, processes: int) -> dict[int, int]:
    """{step: epoch} for every epoch completed within `max_steps` (an epoch ends at one step only)."""
    ends, epoch = {}, 1
    while (step := epoch_end_step(epoch, batches_per_epoch, accumulation, processes)) <= max_steps:
        ends[step] = epoch
        epoch += 1
    return ends


def resolve_epochs(config, batches_per_epoch: int, processes: int):
    """`config` with `max_steps` set from `max_train_epochs` when that is given (it wins, as in kohya); else as is."""
    import dataclasses

    if not config.max_train_epochs:
        return config
    steps = epoch_end_step(config.max_train_epochs, batches_per_epoch, config.gradient_accumulation_steps, processes)
    return dataclasses.replace(config, max_steps=steps)


def intermediate_saves(config, batches_per_epoch: int, processes: int) -> dict[int, list[str]]:
    """{step: [name suffixes]} of the results a run writes before its end: "step00000500" every
    `save_every_n_steps` steps, "epoch000002" after every `save_every_n_epochs`-th epoch (kohya names the
    latter `<name>-000002`; the suffix here says which counter it is). The final result is not listed."""
    saves: dict[int, list[str]] = {}
    every = config.save_every_n_steps
    if every:
        for step in range(every, config.max_steps, every):
            saves.setdefault(step, []).append(f"step{step:08d}")
    if config.save_every_n_epochs:
        ends = epochs_ending_by_step(config.max_steps, batches_per_epoch, config.gradient_accumulation_steps, processes)
        for step, epoch in ends.items():
            if epoch % config.save_every_n_epochs == 0 and step < config.max_steps:
                saves.setdefault(step, []).append(f"epoch{epoch:06d}")
    return saves
