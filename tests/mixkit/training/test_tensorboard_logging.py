"""TensorBoard logging through accelerate's tracker: loss, lr, it/s and validation images land in the
event file; a missing tensorboard package is a clear error before anything is loaded or written."""

from __future__ import annotations

import sys

import pytest

from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora


def _config(model, dataset, output, **overrides) -> SDLoraTrainingConfig:
    settings = dict(model=str(model), dataset=str(dataset), output=str(output), resolution=32, batch_size=2,
                    max_steps=3, learning_rate=1e-2, seed=0, warmup_steps=2, log_with="tensorboard")
    return SDLoraTrainingConfig(**{**settings, **overrides})


def _read_events(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = list(folder.glob("events.out.tfevents.*"))  # the hparams summary sits in a sub-folder
    assert files, f"no event file under {folder}"
    events = EventAccumulator(str(files[0].parent), size_guidance={"scalars": 0, "images": 0})
    events.Reload()
    return events


def test_loss_lr_speed_and_validation_images_are_logged(tiny_sd1_dir, colour_dataset, tmp_path):
    logs = tmp_path / "tb"
    result = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "lora.safetensors", logging_dir=str(logs),
                                   validation_every=3, validation_prompts=["a red square"], validation_steps=1))
    events = _read_events(logs / "lora")
    loss = events.Scalars("loss")
    assert [e.step for e in loss] == [1, 2, 3]
    assert [e.value for e in loss] == pytest.approx(result.losses, rel=1e-6)
    assert [e.value for e in events.Scalars("lr")] == pytest.approx([0.0, 0.5e-2, 1e-2])  # 2-step warm-up, diffusers
    assert all(e.value > 0 for e in events.Scalars("it_per_s"))
    images = events.Images(events.Tags()["images"][0])
    assert [(e.step, e.width, e.height) for e in images] == [(3, 32, 32)]


def test_default_logging_dir_is_next_to_the_output(tiny_sd1_dir, colour_dataset, tmp_path):
    train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "mine.safetensors", max_steps=1, batch_size=1))
    assert [e.step for e in _read_events(tmp_path / "logs" / "mine").Scalars("loss")] == [1]


def test_missing_tensorboard_names_the_package_and_writes_nothing(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # makes `import tensorboard` fail
    (tmp_path / "data" / "1_x").mkdir(parents=True)
    from PIL import Image

    Image.new("RGB", (32, 32)).save(tmp_path / "data" / "1_x" / "a.png")
    with pytest.raises(ImportError, match="pip install tensorboard"):
        train_sd_lora(_config(tmp_path / "no-model", tmp_path / "data", tmp_path / "out" / "x.safetensors"))
    assert not (tmp_path / "out").exists()


def test_unknown_log_target_lists_the_valid_ones(tmp_path):
    with pytest.raises(ValueError, match="Unknown training log target 'wandb'.*'tensorboard'"):
        _config(tmp_path, tmp_path, tmp_path / "x.safetensors", log_with="wandb").check()


def test_the_validation_loss_is_logged_from_the_start(tiny_sd1_dir, colour_dataset, tmp_path):
    logs = tmp_path / "tb"
    result = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "v.safetensors", logging_dir=str(logs),
                                   validation_dataset=str(colour_dataset), validation_loss_every=2))
    logged = [(e.step, e.value) for e in _read_events(logs / "v").Scalars("validation_loss")]
    assert [step for step, _ in logged] == [0, 2, 3]
    assert [value for _, value in logged] == pytest.approx([value for _, value in result.validation_losses], rel=1e-6)
