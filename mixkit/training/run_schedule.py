"""How long a step-counted run is and when it writes results: epochs, `max_train_epochs`, intermediate saves.

The trainers count optimizer steps (resume, schedules and checkpoints are all step-based); kohya's users
think in epochs (`max_train_epochs`, `save_every_n_epochs`). An epoch is one pass over the dataset's
B batches (repeats included). As in kohya's train_network.py, every epoch is the same whole number of
optimizer steps, S = ceil(B / (W · A)) with W processes and A accumulation steps: each process takes
ceil(B / W) of the epoch's batches, and an epoch's last step accumulates only what is left of that epoch
(accelerate syncs gradients at the end of the dataloader), so no step mixes two epochs.
"""

from __future__ import annotations

import math


def steps_per_epoch(batches_per_epoch: int, accumulation: int, processes: int) -> int:
    """kohya's `num_update_steps_per_epoch`: ceil(batches / processes / accumulation)."""
    return math.ceil(batches_per_epoch / (processes * accumulation))


def local_batches_per_epoch(batches_per_epoch: int, processes: int) -> int:
    """How many of an epoch's batches each process takes (accelerate pads the last round by wrapping around)."""
    return math.ceil(batches_per_epoch / processes)


def step_micro_batches(step: int, batches_per_epoch: int, accumulation: int, processes: int) -> tuple[int, range]:
    """(epoch, local batch positions) of 0-based optimizer `step`: the epoch's local batches
    [p·A, min((p+1)·A, L)) for the step's place p in its epoch; the epoch's last step may hold fewer than A."""
    epoch, place = divmod(step, steps_per_epoch(batches_per_epoch, accumulation, processes))
    local = local_batches_per_epoch(batches_per_epoch, processes)
    return epoch, range(place * accumulation, min((place + 1) * accumulation, local))


def epoch_end_step(epoch: int, batches_per_epoch: int, accumulation: int, processes: int) -> int:
    """The optimizer step after which epoch `epoch` (1-based) has been seen whole."""
    return epoch * steps_per_epoch(batches_per_epoch, accumulation, processes)


def epochs_ending_by_step(max_steps: int, batches_per_epoch: int, accumulation: int, processes: int) -> dict[int, int]:
    """{step: epoch} for every epoch completed within `max_steps`."""
    per_epoch = steps_per_epoch(batches_per_epoch, accumulation, processes)
    return {epoch * per_epoch: epoch for epoch in range(1, max_steps // per_epoch + 1)}


def epoch_of_save(at_step: int, kind: str, max_steps: int, batches_per_epoch: int, accumulation: int,
                  processes: int) -> int:
    """kohya's `ss_epoch` of a file written after `at_step` steps: the epoch just finished for an epoch save,
    the epochs completed before the current one for a step save (kohya passes its 0-based loop epoch), and
    the run's number of epochs for the final file."""
    per_epoch = steps_per_epoch(batches_per_epoch, accumulation, processes)
    if kind == "epoch":
        return at_step // per_epoch
    if kind == "step":
        return (at_step - 1) // per_epoch
    return math.ceil(max_steps / per_epoch)


def resolve_epochs(config, batches_per_epoch: int, processes: int):
    """`config` with `max_steps` set from `max_train_epochs` when that is given (it wins, as in kohya), and
    `save_every_n_epochs` from `save_n_epoch_ratio` when that is set: floor(the run's epochs / ratio), at least 1, as
    kohya's train_network.py sets it (overriding save_every_n_epochs); else as is."""
    import dataclasses

    changes = {}
    if config.max_train_epochs:
        changes["max_steps"] = epoch_end_step(config.max_train_epochs, batches_per_epoch,
                                              config.gradient_accumulation_steps, processes)
    ratio = getattr(config, "save_n_epoch_ratio", 0)
    if ratio:
        per_epoch = steps_per_epoch(batches_per_epoch, config.gradient_accumulation_steps, processes)
        epochs = math.ceil(changes.get("max_steps", config.max_steps) / per_epoch)
        changes["save_every_n_epochs"] = epochs // ratio or 1
    return dataclasses.replace(config, **changes) if changes else config


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


def validation_points(config, batches_per_epoch: int, processes: int) -> dict[int, str]:
    """{step: what the sample images made after it are numbered by in their names}, as kohya's
    `sample_images_common` decides: step 0 ("000000") with `validation_at_start` (its `sample_at_first`); with
    `validation_every_epochs` (its `sample_every_n_epochs`) the end of every N-th epoch ("e000002"), the last one
    too when `max_steps` stops the run inside it (kohya runs ceil(max steps / steps per epoch) epochs and samples
    after each, cut short or not), and the step setting is then ignored, as kohya ignores `sample_every_n_steps`;
    else every `validation_every` steps ("000500")."""
    points: dict[int, str] = {0: f"{0:06d}"} if config.validation_at_start else {}
    if config.validation_every_epochs:
        per_epoch = steps_per_epoch(batches_per_epoch, config.gradient_accumulation_steps, processes)
        epochs = math.ceil(config.max_steps / per_epoch)
        points.update({min(epoch * per_epoch, config.max_steps): f"e{epoch:06d}" for epoch in range(1, epochs + 1)
                       if epoch % config.validation_every_epochs == 0})
    elif config.validation_every:
        points.update({step: f"{step:06d}" for step in range(config.validation_every, config.max_steps + 1,
                                                              config.validation_every)})
    return points
