"""Epochs with gradient accumulation as kohya's train_network.py counts them (hunt finding 3).

kohya: num_update_steps_per_epoch = ceil(len(train_dataloader) / num_processes / gradient_accumulation_steps);
max_train_steps = max_train_epochs * that; accelerate ends every epoch on its own (partial) accumulation; a file
saved at an epoch's end has ss_epoch = that epoch (`save_model(..., epoch + 1)`), a step save the 0-based loop
epoch, the final file num_train_epochs.
"""

from __future__ import annotations

from mixkit.io import read_safetensors_metadata
from mixkit.training.run_schedule import (epoch_of_save, epochs_ending_by_step, intermediate_saves, resolve_epochs,
                                          step_micro_batches, steps_per_epoch)
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora

from .schedule_config import ScheduleConfig


def test_the_hunters_run_has_nine_steps_an_epoch_and_eighteen_in_all():
    # 17 batches, accumulation 2, one process: kohya's ceil(17 / 1 / 2) = 9 steps an epoch, 2 epochs = 18 steps.
    assert steps_per_epoch(17, 2, 1) == 9
    assert resolve_epochs(ScheduleConfig(max_train_epochs=2, gradient_accumulation_steps=2), 17, 1).max_steps == 18
    assert epochs_ending_by_step(18, 17, 2, 1) == {9: 1, 18: 2}
    assert intermediate_saves(ScheduleConfig(max_steps=18, gradient_accumulation_steps=2, save_every_n_epochs=1), 17, 1) == {
        9: ["epoch000001"]}


def test_an_epochs_last_step_takes_only_what_is_left_of_that_epoch():
    assert step_micro_batches(7, 17, 2, 1) == (0, range(14, 16))
    assert step_micro_batches(8, 17, 2, 1) == (0, range(16, 17))   # batch 16 alone: it would share with epoch 2's first
    assert step_micro_batches(9, 17, 2, 1) == (1, range(0, 2))
    # Two processes each take ceil(5 / 2) = 3 of 5 batches (accelerate wraps the last round), 2 a step: 2 steps.
    assert steps_per_epoch(5, 2, 2) == 2
    assert step_micro_batches(1, 5, 2, 2) == (0, range(2, 3))
    assert step_micro_batches(2, 5, 2, 2) == (1, range(0, 2))


def test_ss_epoch_of_each_kind_of_save():
    assert epoch_of_save(9, "epoch", 18, 17, 2, 1) == 1
    assert epoch_of_save(9, "step", 18, 17, 2, 1) == 0    # kohya passes its 0-based loop epoch to step saves
    assert epoch_of_save(10, "step", 18, 17, 2, 1) == 1
    assert epoch_of_save(18, "final", 18, 17, 2, 1) == 2
    assert epoch_of_save(5, "final", 5, 17, 2, 1) == 1     # a run of max_steps ending within epoch 1


def test_epoch_files_with_accumulation_say_their_epoch(tiny_sd1_dir, colour_dataset, tmp_path):
    # colour_dataset: 3 images x 2 repeats = 6 batches of 1; accumulation 4 -> ceil(6 / 4) = 2 steps an epoch,
    # the second with 2 micro-batches. Before the fix: 3 steps in all and the epoch-1 file said ss_epoch 2.
    config = SDLoraTrainingConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset),
                                  output=str(tmp_path / "ep.safetensors"), resolution=32, batch_size=1,
                                  gradient_accumulation_steps=4, max_train_epochs=2, save_every_n_epochs=1, seed=3)
    result = train_sd_lora(config)
    assert result.steps == 4 and len(result.losses) == 4
    epoch1 = read_safetensors_metadata(tmp_path / "ep-epoch000001.safetensors")
    final = read_safetensors_metadata(result.output)
    assert (epoch1["ss_epoch"], epoch1["ss_steps"]) == ("1", "2")
    assert (final["ss_epoch"], final["ss_steps"], final["ss_num_epochs"], final["ss_max_train_steps"]) == (
        "2", "4", "2", "4")
