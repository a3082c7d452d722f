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


def test_save_every_n_steps_writes_the_model_a_shorter_run_ends_with(tiny_sd1_dir, colour_dataset, tmp_path):
    """The step-2 folder of a 4-step run holds the EMA UNet a 2-step run ends with, loads through the public
    loader, and writing it (EMA weights in, live weights back) leaves the run unchanged."""
    from safetensors.torch import load_file

    settings = dict(batch_size=2, use_ema=True, ema_decay=0.5)
    unet_file = ("unet", "diffusion_pytorch_model.safetensors")
    saving = train_sd_finetune(_config(tiny_sd1_dir, colour_dataset, tmp_path / "run", max_steps=4,
                                       save_every_n_steps=2, **settings))
    plain = train_sd_finetune(_config(tiny_sd1_dir, colour_dataset, tmp_path / "plain", max_steps=4, **settings))
    short = train_sd_finetune(_config(tiny_sd1_dir, colour_dataset, tmp_path / "short", max_steps=2, **settings))
    assert saving.intermediate_outputs == [(tmp_path / "run-step00000002").absolute()]  # step 4: the output itself
    assert saving.losses == plain.losses
    for written, expected in ((saving.intermediate_outputs[0], short.output), (saving.output, plain.output)):
        a, b = load_file(written.joinpath(*unet_file)), load_file(expected.joinpath(*unet_file))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert load_diffusion_model(saving.intermediate_outputs[0]).unet is not None
    assert not list(tmp_path.glob(".*.tmp"))


def test_save_every_n_steps_refuses_a_taken_folder_before_training(tiny_sd1_dir, colour_dataset, tmp_path):
    (tmp_path / "run-step00000002").mkdir()
    (tmp_path / "run-step00000002" / "x.txt").write_text("keep me")
    with pytest.raises(ValueError, match="intermediate model folder .*run-step00000002"):
        train_sd_finetune(_config(tiny_sd1_dir, colour_dataset, tmp_path / "run", max_steps=4, save_every_n_steps=2))
    assert not (tmp_path / "run").exists()
    assert (tmp_path / "run-step00000002" / "x.txt").read_text() == "keep me"


@pytest.mark.parametrize("every", [-1, True, 2.5, "100"])
def test_save_every_n_steps_must_be_a_count(every, tmp_path):
    with pytest.raises(ValueError, match="save_every_n_steps must be an integer >= 0"):
        _config(tmp_path / "no-model", tmp_path, tmp_path / "out", save_every_n_steps=every).check()


def test_a_resumed_run_keeps_the_folders_it_wrote_and_writes_the_rest(tiny_sd1_dir, colour_dataset, tmp_path):
    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "run", max_steps=4, batch_size=2, use_ema=False,
                     save_every_n_steps=1, checkpoint_dir=str(tmp_path / "ck"))
    first = train_sd_finetune(config, stop_at_step=2)
    assert [p.name for p in first.intermediate_outputs] == ["run-step00000001", "run-step00000002"]
    config.resume_from = str(tmp_path / "ck")
    resumed = train_sd_finetune(config)
    assert [p.name for p in resumed.intermediate_outputs] == ["run-step00000003"]
    assert resumed.output == (tmp_path / "run").absolute()


def test_masked_loss_reaches_the_fine_tune(tiny_sd1_dir, colour_dataset, tmp_path):
    import shutil

    from PIL import Image

    shutil.copytree(colour_dataset, tmp_path / "data")
    for image in (tmp_path / "data").glob("*/*.png"):
        Image.new("L", (32, 32), 0).save(image.with_name(f"{image.stem}-masklabel.png"))
    result = train_sd_finetune(_config(tiny_sd1_dir, tmp_path / "data", tmp_path / "out", max_steps=2, use_ema=False,
                                       masked_loss=True))
    assert result.losses == [0.0, 0.0]


def test_the_fine_tune_reports_the_held_out_loss_of_its_ema_weights(tiny_sd1_dir, colour_dataset, tmp_path):
    # The step-0 value is the base model's; with EMA the final value is the averaged UNet's, which is what
    # the folder holds: a fresh run's step-0 value on that folder reproduces it.
    result = train_sd_finetune(_config(tiny_sd1_dir, colour_dataset, tmp_path / "out", max_steps=2, batch_size=2,
                                       use_ema=True, ema_decay=0.5, validation_dataset=str(colour_dataset)))
    assert [step for step, _ in result.validation_losses] == [0, 2]
    check = train_sd_finetune(_config(result.output, colour_dataset, tmp_path / "check", max_steps=1, batch_size=2,
                                      use_ema=False, validation_dataset=str(colour_dataset)))
    assert check.validation_losses[0][1] == pytest.approx(result.validation_losses[-1][1], rel=1e-5)
