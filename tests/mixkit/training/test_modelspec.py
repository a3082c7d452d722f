"""The SAI model spec block of a trained LoRA, as kohya's `sai_model_spec.build_metadata` writes it (library/
sai_model_spec.py: spec version 1.0.1; architecture by `determine_architecture`, implementation by
`determine_implementation`, title = --metadata_title or the output name, resolution "WxH", date ISO 8601 without
microseconds, prediction type, timestep range "min,max" when limited, encoder layer from the clip skip)."""

from __future__ import annotations

import datetime

import pytest

from mixkit.io import read_safetensors_metadata
from mixkit.training.modelspec import ModelSpecTexts, lora_architecture, lora_modelspec
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora

STAMP = 1_790_000_000.75
STAMP_DATE = datetime.datetime.fromtimestamp(1_790_000_000).isoformat()


@pytest.mark.parametrize("family, v, expected", [
    ("sd1", False, "stable-diffusion-v1/lora"), ("sd2", False, "stable-diffusion-v2-512/lora"),
    ("sd2", True, "stable-diffusion-v2-768-v/lora"), ("sdxl", False, "stable-diffusion-xl-v1-base/lora"),
])
def test_architecture_ids_are_kohyas(family, v, expected):
    assert lora_architecture(family, v) == expected


def test_an_sd1_lora_with_defaults():
    assert lora_modelspec(family="sd1", v_prediction=False, title="my_lora", resolution=512, timestamp=STAMP) == {
        "modelspec.sai_model_spec": "1.0.1", "modelspec.architecture": "stable-diffusion-v1/lora",
        "modelspec.implementation": "diffusers", "modelspec.title": "my_lora", "modelspec.resolution": "512x512",
        "modelspec.date": STAMP_DATE, "modelspec.prediction_type": "epsilon"}


def test_user_texts_limits_and_sdxl():
    spec = lora_modelspec(family="sdxl", v_prediction=True, title="out", resolution=1024, timestamp=STAMP,
                          texts=ModelSpecTexts(title="Red hats", author="me", license="CreativeML Open RAIL-M",
                                               tags="hat, red"),
                          min_timestep=100, clip_skip=2, version="mixkit/0.1.0")
    assert spec["modelspec.implementation"] == "https://github.com/Stability-AI/generative-models"
    assert (spec["modelspec.title"], spec["modelspec.author"], spec["modelspec.license"], spec["modelspec.tags"]) == (
        "Red hats", "me", "CreativeML Open RAIL-M", "hat, red")
    assert "modelspec.description" not in spec
    assert (spec["modelspec.timestep_range"], spec["modelspec.encoder_layer"]) == ("100,1000", "2")
    assert (spec["modelspec.prediction_type"], spec["modelspec.implementation_version"]) == ("v", "mixkit/0.1.0")
    assert lora_modelspec(family="sdxl", v_prediction=False, title="t", resolution=1024, timestamp=STAMP,
                          max_timestep=500, sgm_names=False)["modelspec.implementation"] == "diffusers"
    assert lora_modelspec(family="sd1", v_prediction=False, title="t", resolution=512, timestamp=STAMP,
                          max_timestep=500)["modelspec.timestep_range"] == "0,500"


def test_a_trained_file_carries_the_block(tiny_sd1_dir, colour_dataset, tmp_path):
    config = SDLoraTrainingConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset),
                                  output=str(tmp_path / "red_hats.safetensors"), resolution=32, batch_size=3,
                                  max_steps=1, metadata_author="me", metadata_tags="hat")
    metadata = read_safetensors_metadata(train_sd_lora(config).output)
    spec = {key: value for key, value in metadata.items() if key.startswith("modelspec.")}
    date = spec.pop("modelspec.date")
    assert datetime.datetime.fromisoformat(date).microsecond == 0
    assert spec == {"modelspec.sai_model_spec": "1.0.1", "modelspec.architecture": "stable-diffusion-v1/lora",
                    "modelspec.implementation": "diffusers", "modelspec.title": "red_hats",
                    "modelspec.resolution": "32x32", "modelspec.prediction_type": "epsilon",
                    "modelspec.author": "me", "modelspec.tags": "hat", "modelspec.implementation_version": "mixkit/0.1.0"}


def test_texts_must_be_strings(tmp_path):
    with pytest.raises(ValueError, match="metadata_title must be a string"):
        SDLoraTrainingConfig(model="m", dataset="d", output=str(tmp_path / "o.safetensors"), metadata_title=3).check()
