"""Epochs in step-counted runs: where an epoch ends, what max_train_epochs means, which results a run writes."""

from __future__ import annotations

import pytest
import torch

from mixkit.training.run_schedule import epoch_end_step, epochs_ending_by_step, intermediate_saves, resolve_epochs

from .schedule_config import ScheduleConfig


def test_an_epoch_ends_after_the_step_that_consumes_its_last_batch():
    # 5 batches an epoch, 2 micro-batches a step: kohya's ceil(5 / 2) = 3 steps an epoch (the third takes batch 4
    # alone), so epochs end after steps 3, 6, 9, 12.
    assert [epoch_end_step(e, 5, 2, 1) for e in (1, 2, 3, 4)] == [3, 6, 9, 12]
    assert [epoch_end_step(e, 5, 1, 2) for e in (1, 2, 3, 4)] == [3, 6, 9, 12]  # two processes, the same
    assert epochs_ending_by_step(9, 5, 2, 1) == {3: 1, 6: 2, 9: 3}


def test_max_train_epochs_decides_max_steps():
    assert resolve_epochs(ScheduleConfig(max_train_epochs=3, gradient_accumulation_steps=2), 5, 1).max_steps == 9
    config = ScheduleConfig(max_steps=7)
    assert resolve_epochs(config, 5, 1) is config


def test_save_n_epoch_ratio_is_kohyas_floor_of_the_runs_epochs():
    # kohya's train_network.py: save_every_n_epochs = floor(num_train_epochs / save_n_epoch_ratio) or 1.
    assert resolve_epochs(ScheduleConfig(max_train_epochs=4, save_n_epoch_ratio=2), 5, 1).save_every_n_epochs == 2
    assert resolve_epochs(ScheduleConfig(max_train_epochs=4, save_n_epoch_ratio=3), 5, 1).save_every_n_epochs == 1
    assert resolve_epochs(ScheduleConfig(max_train_epochs=4, save_n_epoch_ratio=9), 5, 1).save_every_n_epochs == 1
    # Counted in steps: 10 steps of 3-step epochs is kohya's ceil(10 / 3) = 4 epochs; the ratio wins over the setting.
    resolved = resolve_epochs(ScheduleConfig(max_steps=10, save_every_n_epochs=1, save_n_epoch_ratio=2), 3, 1)
    assert (resolved.max_steps, resolved.save_every_n_epochs) == (10, 2)
    assert intermediate_saves(resolved, 3, 1) == {6: ["epoch000002"]}


def test_intermediate_saves_name_their_counter_and_leave_out_the_end():
    config = ScheduleConfig(max_steps=10, save_every_n_steps=4, save_every_n_epochs=2)
    # epochs of 3 steps end at 3, 6, 9: every second one at 6; steps 4 and 8; step 10 is the end itself.
    assert intermediate_saves(config, 3, 1) == {4: ["step00000004"], 8: ["step00000008"], 6: ["epoch000002"]}
    assert intermediate_saves(ScheduleConfig(max_steps=6, save_every_n_epochs=1), 3, 1) == {3: ["epoch000001"]}
    assert intermediate_saves(ScheduleConfig(), 3, 1) == {}


def test_a_lora_run_counted_in_epochs_writes_each_epochs_file(tiny_sd1_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    from mixkit.io import read_safetensors_metadata
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.training.sd_lora_config import SDLoraTrainingConfig
    from mixkit.training.sd_lora_trainer import train_sd_lora

    def config(output, **settings):
        return SDLoraTrainingConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset), output=str(output),
                                    resolution=32, batch_size=2, learning_rate=1e-2, rank=4, alpha=4.0, seed=3,
                                    **settings)

    model = load_diffusion_model(tiny_sd1_dir)
    # 3 images repeated twice in batches of 2: 3 steps an epoch.
    epochs = train_sd_lora(config(tmp_path / "e.safetensors", max_train_epochs=2, save_every_n_epochs=1), model=model)
    assert epochs.steps == 6 and epochs.intermediate_outputs == [tmp_path / "e-epoch000001.safetensors"]
    one_epoch = train_sd_lora(config(tmp_path / "o.safetensors", max_steps=3), model=model)
    a, b = load_file(epochs.intermediate_outputs[0]), load_file(one_epoch.output)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    metadata = read_safetensors_metadata(epochs.output)
    assert (metadata["ss_max_train_steps"], metadata["ss_epoch"]) == ("6", "2")


def test_a_fine_tune_counted_in_epochs_writes_each_epochs_folder(tiny_sd1_dir, colour_dataset, tmp_path):
    from mixkit.training.sd_finetune_config import SDFinetuneConfig
    from mixkit.training.sd_finetune_trainer import train_sd_finetune

    result = train_sd_finetune(SDFinetuneConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset),
                                                output=str(tmp_path / "tuned"), resolution=32, batch_size=3,
                                                max_train_epochs=2, save_every_n_epochs=1, use_ema=False))
    assert result.steps == 4 and [p.name for p in result.intermediate_outputs] == ["tuned-epoch000001"]


@pytest.mark.parametrize("settings, message", [(dict(max_train_epochs=0), "max_train_epochs must be an integer in"),
                                               (dict(save_every_n_epochs=-1), "save_every_n_epochs must be")])
def test_bad_epoch_settings_are_named(tmp_path, settings, message):
    from mixkit.training.sd_lora_config import SDLoraTrainingConfig

    with pytest.raises(ValueError, match=message):
        SDLoraTrainingConfig(model="m", dataset="d", output=str(tmp_path / "o.safetensors"), **settings).check()
