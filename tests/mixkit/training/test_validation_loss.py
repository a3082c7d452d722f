"""Validation loss: held-out images chosen by the seed, scored with fixed timesteps and noise, never
perturbing the run; reported at the start, every N steps and at the end."""

from __future__ import annotations

import json

import pytest
import torch

from mixkit.data.records import ImageRecord
from mixkit.io import read_safetensors_metadata
from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora
from mixkit.training.validation_loss import split_held_out, validation_timesteps


def _records(count, prior=0):
    own = [ImageRecord(f"img{i}.png", "x") for i in range(count)]
    return own + [ImageRecord(f"class{i}.png", "y", prior=True) for i in range(prior)]


def test_the_held_out_images_depend_on_the_seed_only_and_never_include_class_images():
    records = _records(10, prior=5)
    train, held = split_held_out(records, 0.2, seed=7)
    assert len(held) == 2 and not any(r.prior for r in held)
    assert len(train) == 13 and all(r in train for r in records[10:])  # class images always train
    assert split_held_out(records, 0.2, seed=7) == (train, held)
    assert len(split_held_out(_records(3), 0.01, seed=0)[1]) == 1  # at least one image
    with pytest.raises(ValueError, match="leaving none to train on"):
        split_held_out(_records(2), 0.9, seed=0)


def test_the_fixed_timesteps_cover_the_trained_range():
    assert validation_timesteps(0, 1000) == [100, 300, 500, 700, 900]
    assert validation_timesteps(200, 400) == [220, 260, 300, 340, 380]


def _config(model, dataset, output, **overrides) -> SDLoraTrainingConfig:
    settings = dict(model=str(model), dataset=str(dataset), output=str(output), resolution=32, batch_size=2,
                    max_steps=4, learning_rate=1e-2, rank=4, alpha=4.0, seed=3)
    return SDLoraTrainingConfig(**{**settings, **overrides})


@pytest.mark.parametrize("use_ema", [False, True])
def test_measuring_the_validation_loss_leaves_the_run_unchanged(tiny_sd1_dir, colour_dataset, tmp_path, use_ema):
    from safetensors.torch import load_file

    model = load_diffusion_model(tiny_sd1_dir)
    # With kohya's dropouts on: the measurement runs in eval mode and draws no random numbers of the run's.
    settings = dict(use_ema=use_ema, ema_decay=0.5, train_word_vectors=["square"], network_dropout=0.1,
                    rank_dropout=0.2, module_dropout=0.1)
    plain = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "p.safetensors", **settings), model=model)
    measured = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "m.safetensors",
                                     validation_dataset=str(colour_dataset), validation_loss_every=2, **settings),
                             model=model)
    assert measured.losses == plain.losses
    a, b = load_file(measured.output), load_file(plain.output)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [step for step, _ in measured.validation_losses] == [0, 2, 4]
    again = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "a.safetensors",
                                  validation_dataset=str(colour_dataset), validation_loss_every=2, **settings),
                          model=model)
    assert again.validation_losses == measured.validation_losses  # fixed noise and timesteps
    assert plain.validation_losses == []


def test_the_validation_loss_falls_on_images_the_run_learns(tiny_sd1_dir, colour_dataset, tmp_path):
    result = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "l.safetensors", max_steps=10,
                                   learning_rate=2e-2, train_text_encoder=True,
                                   validation_dataset=str(colour_dataset)))
    (first_step, first), (last_step, last) = result.validation_losses
    assert (first_step, last_step) == (0, 10)
    assert last < 0.9 * first


def test_a_split_trains_on_the_rest_only(tiny_sd1_dir, colour_dataset, tmp_path):
    result = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "s.safetensors", max_steps=1,
                                   validation_split=0.3))
    metadata = read_safetensors_metadata(result.output)
    assert json.loads(metadata["ss_dataset_dirs"]) == {"2_square": {"n_repeats": 2, "img_count": 2}}
    assert metadata["ss_num_train_images"] == "4"  # two images, two repeats each
    assert [step for step, _ in result.validation_losses] == [0, 1]


@pytest.mark.parametrize("settings, message", [
    (dict(validation_split=1.0), "validation_split must be a number in \\[0, 1\\)"),
    (dict(validation_split=0.2, validation_dataset="x"), "not both"),
    (dict(validation_loss_every=5), "needs held-out images"),
    (dict(validation_loss_every=-1, validation_split=0.2), "validation_loss_every must be an integer >= 0"),
    (dict(validation_split=0.9), "leaving none to train on"),
])
def test_bad_validation_settings_fail_before_loading(colour_dataset, tmp_path, settings, message):
    with pytest.raises(ValueError, match=message):
        train_sd_lora(_config(tmp_path / "no-model", colour_dataset, tmp_path / "o.safetensors", **settings))
