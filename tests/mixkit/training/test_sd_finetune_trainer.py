"""Full UNet fine-tune with EMA: loss falls, resume is exact (EMA included), output is a loadable model."""

from __future__ import annotations

import pytest
import torch

from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.sd_finetune_config import SDFinetuneConfig
from mixkit.training.sd_finetune_trainer import train_sd_finetune


def _config(model, dataset, output, **overrides):
    settings = dict(model=str(model), dataset=str(dataset), output=str(output), resolution=32, batch_size=3,
                    max_steps=6, learning_rate=1e-3, seed=2)
    return SDFinetuneConfig(**{**settings, **overrides})


def test_loss_falls_and_output_loads(tiny_sd1_dir, colour_dataset, tmp_path, fixed_denoising_loss):
    def _eval_loss(folder, dataset):
        return fixed_denoising_loss(load_diffusion_model(folder), dataset)

    result = train_sd_finetune(_config(tiny_sd1_dir, colour_dataset, tmp_path / "tuned", use_ema=False))
    assert (result.output / "unet" / "diffusion_pytorch_model.safetensors").is_file()
    assert (result.output / "mixkit_training_config.json").is_file()
    assert _eval_loss(result.output, colour_dataset) < 0.9 * _eval_loss(tiny_sd1_dir, colour_dataset)


def test_resume_with_ema_is_exact(tiny_sd1_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    settings = dict(max_steps=3, batch_size=2, use_ema=True, ema_decay=0.5)
    straight = train_sd_finetune(_config(tiny_sd1_dir, colour_dataset, tmp_path / "a", **settings))
    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "b", checkpoint_dir=str(tmp_path / "ck"), **settings)
    assert train_sd_finetune(config, stop_at_step=1).output is None
    config.resume_from = str(tmp_path / "ck")
    resumed = train_sd_finetune(config)
    assert resumed.losses == straight.losses[1:]
    a = load_file(straight.output / "unet" / "diffusion_pytorch_model.safetensors")
    b = load_file(resumed.output / "unet" / "diffusion_pytorch_model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    base = load_file(tiny_sd1_dir / "unet" / "diffusion_pytorch_model.safetensors")
    assert any(not torch.equal(a[k], base[k]) for k in a)


def test_refuses_existing_output_and_single_files(tiny_sd1_dir, colour_dataset, tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x.txt").write_text("keep me")
    with pytest.raises(ValueError, match="already exists"):
        train_sd_finetune(_config(tiny_sd1_dir, colour_dataset, tmp_path / "taken"))
    with pytest.raises(ValueError, match="diffusers model folder"):
        train_sd_finetune(_config(tmp_path / "model.safetensors", colour_dataset, tmp_path / "new"))
    with pytest.raises(ValueError, match="ema_decay"):
        _config(tiny_sd1_dir, colour_dataset, tmp_path / "new", ema_decay=1.5).check()


def test_timestep_bounds_reach_the_shared_loop(tiny_sd1_dir, colour_dataset, tmp_path):
    # The bounds are run options of both SD trainers; the loop checks them against the model's schedule.
    with pytest.raises(ValueError, match="min_timestep must be an integer >= 0"):
        train_sd_finetune(_config(tiny_sd1_dir, colour_dataset, tmp_path / "a", min_timestep=-5))
    with pytest.raises(ValueError, match="must lie in 0..1000"):
        train_sd_finetune(_config(tiny_sd1_dir, colour_dataset, tmp_path / "b", min_timestep=990, max_timestep=1001))
    assert not (tmp_path / "b").exists()
    result = train_sd_finetune(_config(tiny_sd1_dir, colour_dataset, tmp_path / "c", max_steps=2, use_ema=False,
                                       min_timestep=500, max_timestep=600))
    assert len(result.losses) == 2 and (result.output / "unet").is_dir()


def test_latents_on_disk_reach_the_fine_tune_and_give_the_same_run(tiny_sd1_dir, colour_dataset, tmp_path, monkeypatch):
    # The disk cache is a run option of both SD trainers: files appear under the cache root, and the run
    # (sampled latents, losses) is the in-memory cache's.
    from mixkit.io.cache_root import cache_root

    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "cache"))
    settings = dict(max_steps=2, use_ema=False)
    memory = train_sd_finetune(_config(tiny_sd1_dir, colour_dataset, tmp_path / "a", cache_latents=True, **settings))
    disk = train_sd_finetune(_config(tiny_sd1_dir, colour_dataset, tmp_path / "b", cache_latents_to_disk=True,
                                     **settings))
    assert disk.losses == memory.losses
    assert len(list((cache_root() / "latents").glob("*/*.safetensors"))) == len(list(colour_dataset.glob("*/*.png")))
