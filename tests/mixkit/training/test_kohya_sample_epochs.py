"""kohya's `sample_every_n_epochs` and `sample_at_first` (validation_every_epochs, validation_at_start).

kohya's `sample_images_common` (library/train_util.py): at step 0 only with `sample_at_first`; with
`sample_every_n_epochs` only at the end of every N-th epoch (the trainers call it with `epoch + 1`), and
`sample_every_n_steps` is then ignored; the file name's number is `e{epoch:06d}` for an epoch sample and
`{steps:06d}` otherwise.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from mixkit.training.config_file import translate_kohya_options
from mixkit.training.run_schedule import validation_points
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora


def _config(**values):
    base = dict(max_steps=10, gradient_accumulation_steps=1, validation_every=0, validation_every_epochs=0,
                validation_at_start=False)
    return SimpleNamespace(**{**base, **values})


def test_steps_every_n():
    assert validation_points(_config(validation_every=4), batches_per_epoch=3, processes=1) == {4: "000004",
                                                                                               8: "000008"}
    assert validation_points(_config(validation_every=5), 3, 1) == {5: "000005", 10: "000010"}


def test_epochs_replace_steps_as_in_kohya():
    # 3 batches an epoch, batch accumulation 2: 2 steps an epoch; epochs end after steps 2, 4, 6, 8, 10.
    config = _config(validation_every=1, validation_every_epochs=2, gradient_accumulation_steps=2)
    assert validation_points(config, batches_per_epoch=3, processes=1) == {4: "e000002", 8: "e000004"}


def test_a_run_cut_short_inside_an_epoch_still_samples_it():
    # kohya: num_train_epochs = ceil(max_train_steps / steps per epoch); the epoch loop samples after each epoch,
    # also the last one that max_train_steps broke off (QA finding: steps 5 of 3-step epochs lacked e000002).
    assert validation_points(_config(max_steps=5, validation_every_epochs=1), 3, 1) == {3: "e000001", 5: "e000002"}
    assert validation_points(_config(max_steps=5, validation_every_epochs=2), 3, 1) == {5: "e000002"}


def test_two_processes_share_an_epochs_batches():
    # 6 batches over 2 processes: 3 steps an epoch.
    assert validation_points(_config(validation_every_epochs=1), 6, 2) == {3: "e000001", 6: "e000002", 9: "e000003",
                                                                           10: "e000004"}  # the 4th, cut short


def test_sample_at_first_adds_step_zero():
    assert validation_points(_config(validation_at_start=True), 3, 1) == {0: "000000"}
    assert validation_points(_config(validation_at_start=True, validation_every=6), 3, 1) == {0: "000000",
                                                                                               6: "000006"}


def test_kohya_names_translate():
    settings = translate_kohya_options({"sample_every_n_epochs": 2, "sample_at_first": True,
                                        "sample_every_n_steps": None})
    assert settings == {"validation_every_epochs": 2, "validation_at_start": True, "validation_every": 0}


@pytest.mark.parametrize("field, value", [("validation_every_epochs", 1), ("validation_at_start", True)])
def test_sample_images_need_prompts(tmp_path, field, value):
    config = SDLoraTrainingConfig(model="m", dataset="d", output=str(tmp_path / "o.safetensors"), **{field: value})
    with pytest.raises(ValueError, match=rf"{field}={value} needs at least one entry in validation_prompts"):
        config.check()


def test_bad_values_are_refused(tmp_path):
    base = dict(model="m", dataset="d", output=str(tmp_path / "o.safetensors"), validation_prompts=["a dog"])
    with pytest.raises(ValueError, match="validation_every_epochs must be an integer >= 0"):
        SDLoraTrainingConfig(**base, validation_every_epochs=-1).check()
    with pytest.raises(TypeError, match="validation_at_start must be true or false"):
        SDLoraTrainingConfig(**base, validation_at_start="yes").check()


def test_a_run_samples_at_first_and_after_each_epoch(tiny_sd1_dir, colour_dataset, tmp_path):
    result = train_sd_lora(SDLoraTrainingConfig(
        model=str(tiny_sd1_dir), dataset=str(colour_dataset), output=str(tmp_path / "out" / "run.safetensors"),
        resolution=32, batch_size=3, max_train_epochs=2, validation_every=1, validation_every_epochs=1,
        validation_at_start=True, validation_steps=2, validation_prompts=["a red square"]))
    names = sorted(p.name for p in (tmp_path / "out" / "sample").iterdir())
    assert [re.sub(r"_\d{14}\.png$", "", name) for name in names] == ["run_000000_00", "run_e000001_00",
                                                                      "run_e000002_00"], names
    assert result.steps > 2  # more than one step an epoch: the step setting really was ignored


def test_the_fine_tune_samples_the_same_way(tiny_sd1_dir, colour_dataset, tmp_path):
    from mixkit.training.sd_finetune_config import SDFinetuneConfig
    from mixkit.training.sd_finetune_trainer import train_sd_finetune

    train_sd_finetune(SDFinetuneConfig(
        model=str(tiny_sd1_dir), dataset=str(colour_dataset), output=str(tmp_path / "tuned"), resolution=32,
        batch_size=3, max_train_epochs=1, validation_every_epochs=1, validation_at_start=True, validation_steps=2,
        validation_prompts=["a red square"]))
    names = sorted(p.name for p in (tmp_path / "tuned-run" / "sample").iterdir())
    assert [re.sub(r"_\d{14}\.png$", "", name) for name in names] == ["tuned_000000_00", "tuned_e000001_00"], names
