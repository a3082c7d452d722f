"""Validation images: the DDIM sampler agrees with diffusers' DDIM, images are saved every N steps,
and turning validation on changes neither the losses nor the weights, also across a resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora
from mixkit.training.validation_images import ddim_step, render_validation_images, trailing_timesteps


def _ddim_scheduler(prediction_type="epsilon"):
    from diffusers import DDIMScheduler

    return DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                         set_alpha_to_one=True, timestep_spacing="trailing", prediction_type=prediction_type)


@pytest.mark.parametrize("steps", [1, 4, 7, 20, 50])
def test_trailing_timesteps_match_diffusers_ddim(steps):
    scheduler = _ddim_scheduler()
    scheduler.set_timesteps(steps)
    assert trailing_timesteps(1000, steps) == scheduler.timesteps.tolist()


@pytest.mark.parametrize("prediction_type", ["epsilon", "v_prediction"])
def test_ddim_step_matches_diffusers(prediction_type):
    scheduler = _ddim_scheduler(prediction_type)
    scheduler.set_timesteps(4)
    generator = torch.Generator().manual_seed(0)
    sample, output = torch.randn(1, 4, 4, 4, generator=generator), torch.randn(1, 4, 4, 4, generator=generator)
    alphas = scheduler.alphas_cumprod
    for t, prev in [(999, 749), (249, None)]:
        expected = scheduler.step(output, t, sample, eta=0.0).prev_sample
        mine = ddim_step(sample, output, alphas[t].item(), alphas[prev].item() if prev else 1.0, prediction_type)
        torch.testing.assert_close(mine, expected, rtol=1e-5, atol=1e-5)


def test_rendered_image_equals_diffusers_ddim_pipeline(tiny_sd1_dir):
    from diffusers import StableDiffusionPipeline

    model = load_diffusion_model(tiny_sd1_dir)
    model.unet.train()  # as during training: rendering must switch to eval and back
    rng = torch.get_rng_state()
    image = render_validation_images(model, ["a blue square", "a red square"], steps=4, seed=5, guidance_scale=3.0,
                                     height=32, width=32)[1]
    assert model.unet.training and not model.vae.training
    assert torch.equal(torch.get_rng_state(), rng), "validation must not draw from the training RNG"
    pipe = StableDiffusionPipeline.from_pretrained(tiny_sd1_dir, safety_checker=None, requires_safety_checker=False)
    pipe.scheduler = _ddim_scheduler()
    pipe.set_progress_bar_config(disable=True)
    latents = torch.randn((1, 4, 4, 4), generator=torch.Generator().manual_seed(5 + 1))
    expected = pipe("a red square", num_inference_steps=4, guidance_scale=3.0, height=32, width=32, latents=latents,
                    output_type="np").images[0]
    assert image.size == (32, 32)
    assert np.abs(np.asarray(image) / 255.0 - expected).max() <= 1 / 255 + 1e-4


def test_sdxl_renders_deterministically_without_touching_the_global_rng(tiny_sdxl_dir):
    model = load_diffusion_model(tiny_sdxl_dir)
    state = torch.get_rng_state()
    first = render_validation_images(model, ["a red square"], steps=2, seed=1, guidance_scale=5.0, height=32, width=32)
    second = render_validation_images(model, ["a red square"], steps=2, seed=1, guidance_scale=5.0, height=32, width=32)
    assert torch.equal(torch.get_rng_state(), state)
    assert np.array_equal(np.asarray(first[0]), np.asarray(second[0]))
    assert np.asarray(first[0]).std() > 0


def _config(model, dataset, output, **overrides) -> SDLoraTrainingConfig:
    settings = dict(model=str(model), dataset=str(dataset), output=str(output), resolution=32, batch_size=2,
                    max_steps=4, learning_rate=1e-2, seed=4, train_text_encoder=True, noise_offset=0.05)
    return SDLoraTrainingConfig(**{**settings, **overrides})


def test_validation_saves_images_and_leaves_training_and_resume_exact(tiny_sd1_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    model = load_diffusion_model(tiny_sd1_dir)
    (tmp_path / "plain").mkdir()
    (tmp_path / "run").mkdir()
    plain = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "plain" / "a.safetensors"), model=model)
    validated = _config(tiny_sd1_dir, colour_dataset, tmp_path / "run" / "b.safetensors", validation_every=2,
                        validation_prompts=["a red square", "a blue square"], validation_steps=2,
                        validation_guidance_scale=4.0, checkpoint_dir=str(tmp_path / "ckpt"))
    first = train_sd_lora(validated, stop_at_step=2, model=model)
    validated.resume_from = str(tmp_path / "ckpt")
    second = train_sd_lora(validated, model=model)
    assert first.losses + second.losses == plain.losses
    a, b = load_file(plain.output), load_file(second.output)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    folder = tmp_path / "run" / "sample"
    names = sorted(p.name for p in folder.iterdir())
    assert [name[:12] for name in names] == ["b_000002_00_", "b_000002_01_", "b_000004_00_", "b_000004_01_"]
    from PIL import Image

    step2, step4 = (np.asarray(Image.open(folder / names[i])) for i in (0, 2))
    assert step2.shape == (32, 32, 3) and not np.array_equal(step2, step4), "images should follow the training"


def test_finetune_writes_validation_images_next_to_the_output(tiny_sd1_dir, colour_dataset, tmp_path):
    from mixkit.training.sd_finetune_config import SDFinetuneConfig
    from mixkit.training.sd_finetune_trainer import train_sd_finetune

    config = SDFinetuneConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset), output=str(tmp_path / "tuned"),
                              resolution=32, max_steps=1, use_ema=False, validation_every=1,
                              validation_prompts=["a green square"], validation_steps=1)
    result = train_sd_finetune(config)
    assert len(list((tmp_path / "tuned-run" / "sample").glob("tuned_000001_00_*.png"))) == 1
    assert not (result.output / "sample").exists()


def test_run_options_round_trip_through_json(tmp_path):
    config = _config("m", "d", "o.safetensors", validation_prompts=["a red square", "a cat"], validation_every=50,
                     log_with="tensorboard", optimizer="adamw8bit", sdxl_key_layout="diffusers")
    (tmp_path / "run.json").write_text(config.to_json(), encoding="utf-8")
    assert SDLoraTrainingConfig.from_json_file(tmp_path / "run.json") == config


@pytest.mark.parametrize("overrides, error, message", [
    ({"validation_every": 5}, ValueError, "needs at least one entry in validation_prompts"),
    ({"validation_every": -1, "validation_prompts": ["x"]}, ValueError, "validation_every must be an integer >= 0"),
    ({"validation_steps": 0}, ValueError, "validation_steps must be an integer in 1..1000"),
    ({"validation_guidance_scale": 0.5}, ValueError, "validation_guidance_scale must be a number in 1..100"),
    ({"validation_prompts": "a cat"}, TypeError, "validation_prompts must be a list of strings"),
])
def test_bad_validation_settings_fail_before_loading(overrides, error, message, tmp_path):
    with pytest.raises(error, match=message):
        train_sd_lora(_config(tmp_path / "none", tmp_path, tmp_path / "x.safetensors", **overrides))


def test_with_ema_the_validation_image_shows_the_model_that_is_saved(tiny_sd1_dir, colour_dataset, tmp_path):
    # The fine-tune keeps an EMA by default and saves it; its last validation image is rendered from the same
    # averaged UNet (rendering the written folder gives the same pixels), and the run itself is unchanged.
    from PIL import Image

    from mixkit.training.sd_finetune_config import SDFinetuneConfig
    from mixkit.training.sd_finetune_trainer import train_sd_finetune

    settings = dict(model=str(tiny_sd1_dir), dataset=str(colour_dataset), resolution=32, max_steps=2, batch_size=2,
                    learning_rate=1e-2, use_ema=True, ema_decay=0.5)
    shown = train_sd_finetune(SDFinetuneConfig(output=str(tmp_path / "a"), validation_every=2,
                                               validation_prompts=["a green square"], validation_steps=2, **settings))
    plain = train_sd_finetune(SDFinetuneConfig(output=str(tmp_path / "b"), **settings))
    assert shown.losses == plain.losses
    saved = render_validation_images(load_diffusion_model(shown.output), ["a green square"], steps=2, seed=0,
                                     guidance_scale=7.0, height=32, width=32)[0]
    logged = Image.open(next((tmp_path / "a-run" / "sample").glob("a_000002_00_*.png")))
    assert np.abs(np.asarray(logged, dtype=int) - np.asarray(saved, dtype=int)).max() <= 1
