"""A run that fails after its adapters or vectors are attached (here: a resume checkpoint of another run) gives the
caller's model back as it was: no hooks left on it, the UNet in eval mode. They stayed attached before, so the
caller's next generation ran through a half-started training's LoRA or vectors."""

from __future__ import annotations

import pytest
import torch

from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora
from mixkit.training.ti_config import SDTextualInversionConfig
from mixkit.training.ti_trainer import train_textual_inversion
from mixkit.training.training_state import CheckpointMismatchError

SETTINGS = dict(resolution=32, batch_size=2, max_steps=2, seed=3, mixed_precision="no", caption_prefix="zqx")


def _hooks(model) -> int:
    modules = [m for part in (model.unet, *model.text_encoders) for m in part.modules()]
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in modules)


def _encode(model) -> torch.Tensor:
    ids = model.tokenizers[0]("a zqx square", padding="max_length", max_length=77, return_tensors="pt").input_ids
    with torch.no_grad():
        return model.text_encoders[0](ids)[0]


@pytest.fixture
def lora_checkpoint(tiny_sd1_dir, colour_dataset, tmp_path):
    """A LoRA run's checkpoint: a textual-inversion run cannot resume from it, nor can a LoRA run of another rank."""
    config = SDLoraTrainingConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset),
                                  output=str(tmp_path / "lora.safetensors"), rank=2, alpha=2.0,
                                  checkpoint_dir=str(tmp_path / "ckpt"), **SETTINGS)
    return train_sd_lora(config, stop_at_step=1).last_checkpoint


@pytest.mark.parametrize("trainer", ["ti", "lora"])
def test_a_refused_resume_leaves_the_callers_model_as_it_was(trainer, tiny_sd1_dir, colour_dataset, tmp_path,
                                                             lora_checkpoint):
    model = load_diffusion_model(tiny_sd1_dir)
    hooks, encoded = _hooks(model), _encode(model)
    if trainer == "ti":
        config = SDTextualInversionConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset),
                                          output=str(tmp_path / "zqx.safetensors"), init_word="red",
                                          resume_from=str(lora_checkpoint), **SETTINGS)
        run = train_textual_inversion
    else:
        config = SDLoraTrainingConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset),
                                      output=str(tmp_path / "other.safetensors"), rank=4, alpha=4.0,
                                      resume_from=str(lora_checkpoint), **SETTINGS)
        run = train_sd_lora
    with pytest.raises(CheckpointMismatchError):
        run(config, model=model)
    assert _hooks(model) == hooks
    assert not model.unet.training
    assert torch.equal(_encode(model), encoded)


def test_a_resume_with_other_optimizer_settings_is_refused_naming_them(tiny_sd1_dir, colour_dataset, tmp_path,
                                                                      lora_checkpoint):
    """Restoring the optimizer puts the old run's rate and hyper-parameters back (torch's load_state_dict replaces
    the parameter groups' settings; LambdaLR its base rates): a new learning rate was silently dropped, and Lion
    resumed from an AdamW checkpoint ran at AdamW's rate and betas with AdamW's moments."""
    model = load_diffusion_model(tiny_sd1_dir)
    hooks = _hooks(model)
    config = SDLoraTrainingConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset),
                                  output=str(tmp_path / "other.safetensors"), rank=2, alpha=2.0, optimizer="lion",
                                  learning_rate=5e-5, resume_from=str(lora_checkpoint), **SETTINGS)
    with pytest.raises(CheckpointMismatchError, match=r"optimizer: 'adamw' in the checkpoint, 'lion' now; "
                                                      r"learning_rate: 0\.0001 in the checkpoint, 5e-05 now\)"):
        train_sd_lora(config, model=model)
    assert _hooks(model) == hooks and not (tmp_path / "other.safetensors").exists()
