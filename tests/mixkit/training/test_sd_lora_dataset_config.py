"""`train_sd_lora` from a kohya dataset config on the tiny SD 1.x model: kohya's epoch arithmetic, the same file as
the equivalent `<repeats>_<concept>` folder, per-subset caption and flip settings, several datasets at once."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from mixkit.io import read_safetensors_metadata
from mixkit.training.config_file import read_config_file, translate_kohya_options
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora

from tests.mixkit.training.conftest import write_dataset_config, write_images, write_toml


def _config(model, dataset, output, **overrides) -> SDLoraTrainingConfig:
    settings = dict(model=str(model), dataset=str(dataset), output=str(output), resolution=32, batch_size=4,
                    max_steps=2, learning_rate=1e-2, rank=4, alpha=4.0, seed=3)
    return SDLoraTrainingConfig(**{**settings, **overrides})


@pytest.fixture(scope="module")
def two_subsets(tmp_path_factory):
    """kohya's layout of the same images both ways: folders `2_red/` (3 images) and `3_blue/` (2 images), and a
    dataset config with those two folders as subsets with num_repeats 2 and 3."""
    root = tmp_path_factory.mktemp("kohya-dataset")
    folders = root / "folders"
    red = write_images(folders / "2_red", ["r1", "r2", "r3"])
    blue = write_images(folders / "3_blue", ["b1", "b2"])
    toml = write_dataset_config(root / "dataset.toml", [
        {"resolution": 32, "batch_size": 4, "subsets": [{"image_dir": red, "num_repeats": 2},
                                                        {"image_dir": blue, "num_repeats": 3}]}],
        general={"caption_extension": ".txt"})
    return folders, toml


def test_an_epoch_is_every_subsets_images_times_their_repeats_over_the_batch_size(tiny_sd1_dir, two_subsets, tmp_path):
    folders, toml = two_subsets
    # 3 x 2 + 2 x 3 = 12 samples an epoch, batch size 4: 3 batches, so two epochs are 6 steps (kohya's count)
    result = train_sd_lora(_config(tiny_sd1_dir, toml, tmp_path / "toml.safetensors", max_train_epochs=2))
    assert result.steps == 6
    metadata = read_safetensors_metadata(result.output)
    assert (metadata["ss_num_train_images"], metadata["ss_num_batches_per_epoch"], metadata["ss_num_epochs"]) == (
        "12", "3", "2")
    assert json.loads(metadata["ss_dataset_dirs"]) == {"2_red": {"n_repeats": 2, "img_count": 3},
                                                      "3_blue": {"n_repeats": 3, "img_count": 2}}
    (dataset,) = json.loads(metadata["ss_datasets"])
    assert (dataset["batch_size_per_device"], dataset["num_train_images"], dataset["resolution"]) == (4, 12, [32, 32])
    assert [(s["image_dir"], s["img_count"], s["num_repeats"], s["is_reg"]) for s in dataset["subsets"]] == [
        ("2_red", 3, 2, False), ("3_blue", 2, 3, False)]
    # as kohya's, the run-wide dataset keys are left out: the datasets' own values are in ss_datasets
    assert not {"ss_resolution", "ss_batch_size_per_device", "ss_enable_bucket", "ss_bucket_info"} & metadata.keys()
    # the same folders as one kohya-style dataset train the same file, tensor for tensor
    folder_run = train_sd_lora(_config(tiny_sd1_dir, folders, tmp_path / "folders.safetensors", max_train_epochs=2))
    assert folder_run.steps == 6 and folder_run.losses == result.losses
    assert read_safetensors_metadata(folder_run.output)["ss_resolution"] == "(32, 32)"  # kohya's (width, height)
    toml_tensors, folder_tensors = load_file(result.output), load_file(folder_run.output)
    assert toml_tensors.keys() == folder_tensors.keys()
    assert all(torch.equal(toml_tensors[k], folder_tensors[k]) for k in toml_tensors)


def test_a_subsets_own_caption_and_flip_settings_train_as_the_runs_would(tiny_sd1_dir, two_subsets, tmp_path):
    folders, _ = two_subsets
    augmented = dict(flip_aug=True, caption_dropout_rate=0.5, shuffle_caption=True)
    toml = write_dataset_config(tmp_path / "dataset.toml", [{"subsets": [
        {"image_dir": folders / "2_red", "num_repeats": 2, **augmented},
        {"image_dir": folders / "3_blue", "num_repeats": 3, **augmented}]}])
    per_subset = train_sd_lora(_config(tiny_sd1_dir, toml, tmp_path / "subsets.safetensors", max_steps=3))
    per_run = train_sd_lora(_config(tiny_sd1_dir, folders, tmp_path / "run.safetensors", max_steps=3, **augmented))
    plain = train_sd_lora(_config(tiny_sd1_dir, folders, tmp_path / "plain.safetensors", max_steps=3))
    assert per_subset.losses == per_run.losses != plain.losses


def test_two_datasets_at_two_resolutions_train_together(tiny_sd1_dir, two_subsets, tmp_path):
    folders, _ = two_subsets
    big = write_images(tmp_path / "big", ["m", "n", "o"], size=64)
    toml = write_dataset_config(tmp_path / "dataset.toml", [
        {"resolution": 32, "batch_size": 4, "subsets": [{"image_dir": folders / "2_red", "num_repeats": 2}]},
        {"resolution": 64, "batch_size": 2, "subsets": [{"image_dir": big}]}])
    # ceil(6 / 4) + ceil(3 / 2) = 4 batches an epoch
    result = train_sd_lora(_config(tiny_sd1_dir, toml, tmp_path / "group.safetensors", max_train_epochs=1))
    assert result.steps == 4 and all(torch.isfinite(torch.tensor(result.losses)))
    metadata = read_safetensors_metadata(result.output)
    assert metadata["ss_num_train_images"] == "9"
    assert [(d["resolution"], d["batch_size_per_device"], d["num_train_images"])
            for d in json.loads(metadata["ss_datasets"])] == [([32, 32], 4, 6), ([64, 64], 2, 3)]


def test_a_kohya_config_files_dataset_config_line_is_the_runs_dataset(two_subsets, tmp_path):
    _, toml = two_subsets
    path = write_toml(tmp_path / "kohya.toml", f'[dataset_arguments]\ndataset_config = "{toml}"\n'
                                          f'train_data_dir = "ignored"\n')
    assert translate_kohya_options(read_config_file(path)) == {"dataset": str(toml)}


def test_each_row_of_a_batch_takes_its_own_subsets_caption_settings(tiny_sd1_dir, two_subsets, tmp_path, monkeypatch):
    from mixkit.training.denoising_loop import ConditionedDenoiser

    folders, _ = two_subsets
    toml = write_dataset_config(tmp_path / "dataset.toml", [{"batch_size": 4, "subsets": [
        {"image_dir": folders / "2_red", "num_repeats": 2, "caption_dropout_rate": 1.0},
        {"image_dir": folders / "3_blue", "num_repeats": 3, "caption_prefix": "sks"}]}])
    seen = []
    forward = ConditionedDenoiser.forward

    def recording(self, noisy, timesteps, captions, *rest):
        seen.extend(captions)
        return forward(self, noisy, timesteps, captions, *rest)

    monkeypatch.setattr(ConditionedDenoiser, "forward", recording)
    train_sd_lora(_config(tiny_sd1_dir, toml, tmp_path / "rows.safetensors", max_train_epochs=1))
    # one epoch: every red sample (3 x 2) lost its caption, every blue one (2 x 3) got the prefix
    assert sorted(seen) == [""] * 6 + ["sks a b1 square, flat"] * 3 + ["sks a b2 square, flat"] * 3


def test_base_model_prior_target_reads_the_class_images_of_an_is_reg_subset(tiny_sd1_dir, two_subsets, tmp_path):
    # kohya users keep class images in a dataset config (an is_reg subset), not in class_dataset. At the first step
    # the adapters are zero, so with prior_target='base_model' the class rows add nothing to the loss, whatever their
    # weight, exactly as weight-0 rows trained towards the noise would; towards the noise at weight 1000 they dominate.
    folders, _ = two_subsets
    toml = write_dataset_config(tmp_path / "reg.toml", [{"batch_size": 12, "subsets": [
        {"image_dir": folders / "2_red", "num_repeats": 2},
        {"image_dir": folders / "3_blue", "num_repeats": 3, "is_reg": True}]}])

    def first_loss(name, **overrides):
        return train_sd_lora(_config(tiny_sd1_dir, toml, tmp_path / f"{name}.safetensors", max_steps=1,
                                     **overrides)).losses[0]

    base_model = first_loss("base", prior_target="base_model", prior_loss_weight=1000.0)
    assert base_model == pytest.approx(first_loss("zero", prior_loss_weight=0.0), rel=1e-5)
    assert first_loss("noise", prior_loss_weight=1000.0) > 100 * base_model
    assert read_safetensors_metadata(tmp_path / "base.safetensors")["ss_prior_target"] == "base_model"


def test_base_model_prior_target_needs_an_is_reg_subset(tiny_sd1_dir, two_subsets, tmp_path):
    _, toml = two_subsets
    with pytest.raises(ValueError, match="no subset with is_reg = true"):
        train_sd_lora(_config(tiny_sd1_dir, toml, tmp_path / "x.safetensors", prior_target="base_model"))
    assert not (tmp_path / "x.safetensors").exists()
