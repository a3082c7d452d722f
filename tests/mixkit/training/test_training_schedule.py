"""prediction_type and zero_terminal_snr (kohya's --v_parameterization / --zero_terminal_snr): the run trains on the
changed schedule and target, a fine-tune writes them into its model folder, a LoRA records them, the caller's
model is never changed, and an epsilon target on a zero-SNR schedule is refused before training."""

from __future__ import annotations

import json

import pytest
import torch

from mixkit.io import read_safetensors_metadata
from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training import diffusion_objective
from mixkit.training.sd_finetune_config import SDFinetuneConfig
from mixkit.training.sd_finetune_trainer import train_sd_finetune
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora
from mixkit.training.training_schedule import training_scheduler_config

SD15_SCHEDULE = {"beta_schedule": "scaled_linear", "beta_start": 0.00085, "beta_end": 0.012,
                 "num_train_timesteps": 1000, "timestep_spacing": "leading"}


def _common(model, dataset, output, **overrides) -> dict:
    return {**dict(model=str(model), dataset=str(dataset), output=str(output), resolution=32, batch_size=2,
                   max_steps=2, learning_rate=1e-3, seed=4), **overrides}


def _spy_targets(monkeypatch) -> list:
    """Record (alpha_bar at the last timestep, prediction type) of every training target the loop asks for."""
    seen, target = [], diffusion_objective.diffusion_target

    def spy(latents, noise, timesteps, alphas_cumprod, prediction_type):
        seen.append((alphas_cumprod[-1].item(), prediction_type))
        return target(latents, noise, timesteps, alphas_cumprod, prediction_type)

    monkeypatch.setattr(diffusion_objective, "diffusion_target", spy)
    return seen


def test_the_scheduler_config_a_run_trains_on():
    assert training_scheduler_config(SD15_SCHEDULE, None, False) == SD15_SCHEDULE
    assert training_scheduler_config(SD15_SCHEDULE, "v_prediction", True) == {
        **SD15_SCHEDULE, "prediction_type": "v_prediction", "rescale_betas_zero_snr": True,
        "timestep_spacing": "trailing"}
    # A model that already is v-prediction needs no prediction_type to take the zero-SNR schedule.
    v_model = {**SD15_SCHEDULE, "prediction_type": "v_prediction"}
    assert training_scheduler_config(v_model, None, True)["rescale_betas_zero_snr"] is True
    for epsilon in (SD15_SCHEDULE, {**SD15_SCHEDULE, "prediction_type": "epsilon"}):
        with pytest.raises(ValueError, match="needs a v-prediction target.*prediction_type"):
            training_scheduler_config(epsilon, None, True)
    with pytest.raises(ValueError, match="needs a v-prediction target"):
        training_scheduler_config(v_model, "epsilon", True)


def test_snr_weights_stay_finite_at_zero_terminal_snr():
    from diffusers import DDPMScheduler

    alphas = DDPMScheduler(**training_scheduler_config(SD15_SCHEDULE, "v_prediction", True)).alphas_cumprod
    last = torch.tensor([999])
    assert alphas[-1].item() == 0.0
    assert diffusion_objective.min_snr_weights(alphas, last, 5.0, "v_prediction").item() == 0.0
    assert diffusion_objective.debiased_weights(alphas, last, "v_prediction").item() == 1.0
    assert diffusion_objective.scheduled_huber_c(last, alphas, 0.1, "snr").item() == pytest.approx(0.1)
    # At zero SNR the v target is minus the clean latents: the only timestep that teaches the image from nothing.
    latents, noise = torch.randn(1, 4, 2, 2), torch.randn(1, 4, 2, 2)
    assert torch.equal(diffusion_objective.diffusion_target(latents, noise, last, alphas, "v_prediction"), -latents)


def test_a_v_prediction_zero_snr_fine_tune_trains_on_that_schedule_and_writes_it(tiny_sd1_dir, colour_dataset,
                                                                                tmp_path, monkeypatch):
    from pipelines.txt2img import TextToImage

    seen = _spy_targets(monkeypatch)
    config = SDFinetuneConfig(**_common(tiny_sd1_dir, colour_dataset, tmp_path / "zsnr", use_ema=False,
                                        prediction_type="v_prediction", zero_terminal_snr=True))
    result = train_sd_finetune(config)
    assert seen and set(seen) == {(0.0, "v_prediction")}
    written = json.loads((result.output / "scheduler" / "scheduler_config.json").read_text())
    base = json.loads((tiny_sd1_dir / "scheduler" / "scheduler_config.json").read_text())
    assert written == {**base, "prediction_type": "v_prediction", "rescale_betas_zero_snr": True,
                       "timestep_spacing": "trailing"}
    assert load_diffusion_model(tiny_sd1_dir).prediction_type == "epsilon"  # the base folder is untouched
    assert load_diffusion_model(result.output).prediction_type == "v_prediction"
    # The written model samples through the public pipeline on its zero-SNR schedule (first step: pure noise).
    pipe = TextToImage.from_pretrained(result.output)
    image = pipe(prompt="a red square", seed=1, width=32, height=32, steps=3, sampler="Euler").images[0]
    assert image.size == (32, 32) and len(set(image.getdata())) > 1


def test_a_plain_fine_tune_writes_the_base_schedule_unchanged(tiny_sd1_dir, colour_dataset, tmp_path, monkeypatch):
    seen = _spy_targets(monkeypatch)
    result = train_sd_finetune(SDFinetuneConfig(**_common(tiny_sd1_dir, colour_dataset, tmp_path / "plain",
                                                          use_ema=False)))
    assert set(seen) == {(seen[0][0], "epsilon")} and seen[0][0] > 0.0
    assert ((result.output / "scheduler" / "scheduler_config.json").read_text()
            == (tiny_sd1_dir / "scheduler" / "scheduler_config.json").read_text())


def test_an_epsilon_model_on_a_zero_snr_schedule_is_refused_before_training(tiny_sd1_dir, colour_dataset, tmp_path):
    with pytest.raises(ValueError, match="needs a v-prediction target"):
        SDLoraTrainingConfig(**_common(tiny_sd1_dir, colour_dataset, tmp_path / "a.safetensors",
                                       prediction_type="epsilon", zero_terminal_snr=True)).check()
    with pytest.raises(ValueError, match="prediction_type must be one of epsilon, v_prediction"):
        SDLoraTrainingConfig(**_common(tiny_sd1_dir, colour_dataset, tmp_path / "a.safetensors",
                                       prediction_type="sample")).check()
    # The tiny model predicts epsilon: zero_terminal_snr alone is refused once its schedule is read.
    with pytest.raises(ValueError, match="needs a v-prediction target"):
        train_sd_finetune(SDFinetuneConfig(**_common(tiny_sd1_dir, colour_dataset, tmp_path / "b",
                                                     zero_terminal_snr=True)))
    assert not (tmp_path / "b").exists() and not (tmp_path / "b-checkpoints").exists()


def test_a_v_prediction_lora_records_its_target_and_leaves_the_callers_model_alone(tiny_sd1_dir, colour_dataset,
                                                                                 tmp_path, monkeypatch):
    seen = _spy_targets(monkeypatch)
    model = load_diffusion_model(tiny_sd1_dir)
    before = dict(model.scheduler_config)
    config = SDLoraTrainingConfig(**_common(tiny_sd1_dir, colour_dataset, tmp_path / "v.safetensors", rank=2,
                                            alpha=2.0, prediction_type="v_prediction", zero_terminal_snr=True))
    result = train_sd_lora(config, model=model)
    assert set(seen) == {(0.0, "v_prediction")}
    assert model.scheduler_config == before and model.prediction_type == "epsilon"
    metadata = read_safetensors_metadata(result.output)
    assert (metadata["ss_zero_terminal_snr"], metadata["ss_v_parameterization"]) == ("True", "True")
    assert metadata["modelspec.prediction_type"] == "v"
    assert (metadata["ss_clip_skip"], metadata["ss_max_token_length"]) == ("1", "75")
    plain = train_sd_lora(SDLoraTrainingConfig(**_common(tiny_sd1_dir, colour_dataset, tmp_path / "e.safetensors",
                                                         rank=2, alpha=2.0)), model=model)
    metadata = read_safetensors_metadata(plain.output)
    assert (metadata["ss_zero_terminal_snr"], metadata["ss_v_parameterization"]) == ("False", "False")
    assert metadata["modelspec.prediction_type"] == "epsilon"
